//! The chat-UI stream when the server answers built-in tool calls itself (`--code-exec`,
//! `skills`). The loop runs in `server/code/agent.rs` in the session's workspace; this file
//! turns its activity into frames: `token` / `thinking` for every round's content,
//! `tool_progress` (`running`, then `finished`) and `skill_step` (with the files the call
//! wrote, as download links) for each built-in call, and the terminal `done` frame.

use axum::response::Response;
use weft_core::chat::Message;
use weft_core::sampler::SamplerConfig;

use super::chat::{calls_frame, done_frame, error_frame, remember, round3, text_frames};
use super::types::UiFrame;
use crate::server::code::agent::{Activity, Agent, ClientTools, End, Step};
use crate::server::code::types::{ExecutedCall, SkillStepFrame, ToolProgressFrame};
use crate::server::common::reply::ReplyParts;
use crate::server::generate::{GenRequest, Reasoning};
use crate::server::leased::Leased;
use crate::server::stream::{frames, json_frame, sse};
use crate::server::ui::UiState;

/// Everything the loop needs from the request.
pub struct LoopRequest {
    /// Whose session it is.
    pub owner: String,
    pub sid: String,
    /// The conversation as the session records it.
    pub conversation: Vec<Message>,
    /// The conversation as the model sees it (with the skills note).
    pub for_model: Vec<Message>,
    /// The client's own tools: their calls end the run and come back as a `tool_calls` frame.
    pub client: ClientTools,
    pub sampling: SamplerConfig,
    pub max_tokens: Option<i64>,
}

/// `{"tool_progress":"running",...}`.
pub fn running_frame(tool: &str, detail: Option<String>) -> String {
    json_frame(&UiFrame::ToolProgress(ToolProgressFrame {
        tool_progress: "running",
        tool: tool.to_string(),
        text: String::new(),
        seconds: 0.0,
        detail,
    }))
}

/// `{"tool_progress":"writing",...}`: a piece of a call the model is writing (`tool` is empty
/// until the call names its tool).
pub fn writing_frame(tool: Option<&str>, text: &str) -> String {
    json_frame(&UiFrame::ToolProgress(ToolProgressFrame {
        tool_progress: "writing",
        tool: tool.unwrap_or_default().to_string(),
        text: text.to_string(),
        seconds: 0.0,
        detail: None,
    }))
}

/// `{"tool_progress":"finished",...}` then `{"skill_step":...}`.
pub fn finished_frames(e: &ExecutedCall) -> Vec<String> {
    let progress = UiFrame::ToolProgress(ToolProgressFrame {
        tool_progress: "finished",
        tool: e.name.clone(),
        text: String::new(),
        seconds: e.seconds,
        detail: None,
    });
    let step = UiFrame::SkillStep(SkillStepFrame {
        skill_step: e.name.clone(),
        skill: e.skill.clone(),
        detail: e.detail.clone(),
        ok: e.ok,
        round: e.round,
        files: e.files.clone(),
    });
    vec![json_frame(&progress), json_frame(&step)]
}

pub fn respond(st: UiState, m: Leased, agent: Agent, r: LoopRequest) -> Response {
    let st2 = st.clone();
    let (sampling, max_tokens) = (r.sampling, r.max_tokens);
    let make_req = move |_: &Leased, prompt: Vec<u32>| {
        let max_tokens = st2.inference.tokens_to_generate(prompt.len(), max_tokens)?;
        Ok(GenRequest::plain(prompt, sampling.clone(), max_tokens))
    };
    let reasoning = match m.template().is_some_and(|t| t.marks_reasoning()) {
        true => Reasoning::Closed,
        false => Reasoning::Absent,
    };
    // A call of a name neither the server nor the client declared ends the loop like an
    // answer (its text is dropped).
    let rx = agent.spawn(m, r.for_model, r.client, Box::new(make_req));
    let started = std::time::Instant::now();
    let mut parts = ReplyParts::new(reasoning, None, true);
    let mut shown = String::new();
    let (owner, sid, conversation) = (r.owner, r.sid, r.conversation);
    let f = move |step: Option<Step>| -> (Vec<String>, bool) {
        let elapsed = round3(started.elapsed().as_secs_f64());
        match step {
            None => (vec![], true),
            Some(Step::Activity(Activity::Text(t))) => {
                let (thinking, answer) = parts.push(&t);
                (text_frames(thinking, answer, &mut shown), false)
            }
            Some(Step::Activity(Activity::Writing { tool, text })) => {
                (vec![writing_frame(tool.as_deref(), &text)], false)
            }
            Some(Step::Activity(Activity::Running { call, detail, .. })) => {
                (vec![running_frame(&call.name, detail)], false)
            }
            Some(Step::Activity(Activity::Finished(e))) => (finished_frames(&e), false),
            Some(Step::End(Ok(o))) => {
                let (thinking, answer, _) = parts.finish();
                let mut out = text_frames(thinking, answer, &mut shown);
                let calls = o.end.client_calls();
                out.extend(calls_frame(&calls));
                let (End::Final(reply) | End::ClientCalls(reply)) = &o.end;
                // The session remembers the answer, not the rounds: the client sends the
                // conversation back without them, and the workspace keeps the files.
                let answer = ReplyParts::new(reasoning, None, false)
                    .whole(&reply.content)
                    .1;
                remember(&st, &owner, &sid, &conversation, &answer, &calls);
                out.push(done_frame(&o.total(), elapsed, &sid));
                (out, true)
            }
            Some(Step::End(Err(e))) => (vec![error_frame(e.message, elapsed, &sid)], true),
        }
    };
    sse(frames(rx, f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::code::types::FileLink;
    use serde_json::{json, Value};

    #[test]
    fn frames_have_the_peer_documents_shapes() {
        let w: Value =
            serde_json::from_str(&writing_frame(Some("run_python"), "{\"code\": \"pri")).unwrap();
        assert_eq!(
            w,
            json!({"tool_progress": "writing", "tool": "run_python", "text": "{\"code\": \"pri",
                   "seconds": 0.0, "detail": null})
        );
        let v: Value = serde_json::from_str(&running_frame(
            "run_python",
            Some("python · 8 bytes of code".into()),
        ))
        .unwrap();
        assert_eq!(
            v,
            json!({"tool_progress": "running", "tool": "run_python", "text": "", "seconds": 0.0,
                   "detail": "python · 8 bytes of code"})
        );
        let e = ExecutedCall {
            round: 2,
            id: "call_1".into(),
            name: "run_python".into(),
            arguments: json!({"code": "x"}),
            ok: true,
            output: String::new(),
            detail: Some("python · 1 bytes of code".into()),
            skill: None,
            seconds: 2.4,
            files: vec![FileLink {
                name: "report.csv".into(),
                bytes: 18,
                url: "/api/code/artifacts/7f/report.csv".into(),
            }],
        };
        let f = finished_frames(&e);
        let p: Value = serde_json::from_str(&f[0]).unwrap();
        assert_eq!(
            p,
            json!({"tool_progress": "finished", "tool": "run_python", "text": "", "seconds": 2.4,
                   "detail": null})
        );
        let s: Value = serde_json::from_str(&f[1]).unwrap();
        assert_eq!(
            s,
            json!({"skill_step": "run_python", "skill": null, "detail": "python · 1 bytes of code",
                   "ok": true, "round": 2, "files": [{"name": "report.csv", "bytes": 18,
                   "url": "/api/code/artifacts/7f/report.csv"}]})
        );
    }
}
