//! Ollama's chat when the server answers built-in tool calls itself (`--code-exec`, `skills`):
//! the loop runs in `server/code/agent.rs`; this file shapes its result as Ollama frames. The
//! final frame's message carries `executed_calls`; streamed, every round's content is sent as
//! it is generated.

use axum::response::IntoResponse;
use axum::Json;
use weft_core::chat::Message;

use super::respond::Shape;
use super::types::{Frame, Payload, StreamError};
use super::Res;
use crate::registry::names;
use crate::server::code::agent::{Activity, Agent, ClientTools, End, Outcome, Step};
use crate::server::code::types::ExecutedCall;
use crate::server::common::options::Options;
use crate::server::leased::Leased;
use crate::server::ollama::OllamaState;
use crate::server::stream::{frames, json_frame, ndjson};

/// Everything the loop needs from the request.
pub struct LoopRequest {
    pub messages: Vec<Message>,
    pub client: ClientTools,
    pub options: Option<Options>,
    pub format: Option<serde_json::Value>,
    pub stream: bool,
}

/// The final frame: `text` and the client's calls in the message, with `executed_calls`.
fn last_frame(model: &str, text: String, o: &Outcome) -> Frame {
    let total = o.total();
    let calls = o.end.client_calls();
    let mut f = Shape::Chat.last(model, text, &calls, &total);
    if let Payload::Chat { message } = &mut f.payload {
        message.executed_calls = executed(&o.executed);
    }
    f
}

fn executed(e: &[ExecutedCall]) -> Option<Vec<ExecutedCall>> {
    (!e.is_empty()).then(|| e.to_vec())
}

pub async fn respond(st: OllamaState, m: Leased, agent: Agent, r: LoopRequest) -> Res {
    let name = names::tagged(&m.name);
    let (options, format) = (r.options, r.format);
    let make_req = move |m: &Leased, prompt| {
        super::generate::request(&st, m, prompt, options.clone(), format.as_ref())
    };
    if !r.stream {
        let out = agent.run(&m, &r.messages, &r.client, make_req, None).await;
        agent.finish().await;
        let out = out?;
        let content = match &out.end {
            End::Final(reply) | End::ClientCalls(reply) => reply.content.clone(),
        };
        return Ok(Json(last_frame(&name, content, &out)).into_response());
    }
    let rx = agent.spawn(m, r.messages, r.client, Box::new(make_req));
    let f = move |step: Option<Step>| -> (Vec<String>, bool) {
        match step {
            None => (vec![], true),
            Some(Step::Activity(Activity::Text(t))) => {
                (vec![json_frame(&Shape::Chat.frame(&name, t, &[]))], false)
            }
            Some(Step::Activity(_)) => (vec![], false),
            Some(Step::End(Ok(o))) => (
                vec![json_frame(&last_frame(&name, String::new(), &o))],
                true,
            ),
            Some(Step::End(Err(e))) => (vec![json_frame(&StreamError { error: e.message })], true),
        }
    };
    Ok(ndjson(frames(rx, f)))
}
