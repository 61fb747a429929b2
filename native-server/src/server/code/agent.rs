//! The server-side tool loop for the chat surfaces, over [`weft_sandbox::ToolLoop`].
//!
//! Each turn renders the conversation (the request's messages, then every executed round: the
//! assistant message with its calls and one `tool` message per result) with the model's chat
//! template, generates, and parses the calls. Built-in calls run on the blocking pool (inside
//! `ToolLoop`); calls of the client's own tools end the loop and go back to the client. Files a
//! call writes are copied to the artifact store so they outlive the workspace.
//!
//! Everything a surface may stream (content of every round, call started, call finished with
//! its download links) comes out of one ordered channel of [`Activity`].

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use weft_core::chat::{self, Content, Message};
use weft_core::scheduler::{Event, Summary};
use weft_sandbox::tools::ToolResult;
use weft_sandbox::{ArtifactStore, LoopEnd, LoopEvent, Round, ToolCall, ToolLoop, Turn, Workspace};

use super::types::{ExecutedCall, FileLink, OUTPUT_EXCERPT};
use crate::server::common::ids;
use crate::server::common::tools::{self as parse, ToolStream};
use crate::server::error::ApiError;
use crate::server::generate::{self, GenRequest};
use crate::server::leased::Leased;

/// The loop for one request, with where its files are saved.
pub struct Agent {
    pub lp: ToolLoop,
    artifacts: ArtifactStore,
}

/// One model turn.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The visible text (without the calls).
    pub content: String,
    /// The calls it made, built-in and the client's.
    pub calls: Vec<ToolCall>,
    pub summary: Summary,
}

/// How a run ended.
#[derive(Debug)]
pub enum End {
    /// The answer.
    Final(Reply),
    /// The model called the client's own tools (`calls` holds only those): return them.
    ClientCalls(Reply),
}

impl End {
    /// The client's calls (none for an answer), without the ids the loop gave them.
    pub fn client_calls(&self) -> Vec<parse::ToolCall> {
        match self {
            End::Final(_) => Vec::new(),
            End::ClientCalls(r) => r
                .calls
                .iter()
                .map(|c| parse::ToolCall {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        }
    }
}

/// The result of [`Agent::run`].
#[derive(Debug)]
pub struct Outcome {
    pub end: End,
    /// Every built-in call, in order.
    pub executed: Vec<ExecutedCall>,
    /// Every turn's summary, in order (for usage).
    pub summaries: Vec<Summary>,
}

impl Outcome {
    /// The turns' figures added up; `finish` is the last turn's.
    pub fn total(&self) -> Summary {
        total(&self.summaries)
    }
}

/// What a run produces while it runs, in order.
#[derive(Debug)]
pub enum Activity {
    /// Content of a turn that is safe to show (never a call's text).
    Text(String),
    /// The model is writing a call: `text` is the newly generated piece of it and `tool` the
    /// tool's name once the call text has it (the chat UI's `writing` phase).
    Writing { tool: Option<String>, text: String },
    /// A built-in call is starting; `detail` says what it works on.
    Running {
        round: usize,
        call: ToolCall,
        detail: Option<String>,
    },
    /// A built-in call finished (files saved).
    Finished(ExecutedCall),
}

/// A surface's generation request for a rendered prompt (boxed for [`Agent::spawn`]: a
/// concrete type lets rustc see the spawned future is `Send`).
pub type MakeRequest = Box<dyn Fn(&Leased, Vec<u32>) -> Result<GenRequest, ApiError> + Send + Sync>;

/// What a spawned run sends: its activity, then how it ended.
#[derive(Debug)]
pub enum Step {
    Activity(Activity),
    End(Result<Outcome, ApiError>),
}

/// The tools a client declared (definitions as sent, and their names).
#[derive(Clone, Debug, Default)]
pub struct ClientTools {
    pub defs: Vec<Value>,
    pub names: Vec<String>,
}

/// Inside a run: content and loop events, in the order they happened.
enum Progress {
    Text(String),
    Writing(Option<String>, String),
    Running(usize, ToolCall),
    Finished(usize, ToolCall, ToolResult, f64),
}

impl Agent {
    pub fn new(lp: ToolLoop, artifacts: ArtifactStore) -> Self {
        Agent { lp, artifacts }
    }

    /// The workspace the calls run in.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.lp.workspace
    }

    /// The client's tools plus the built-in ones: definitions for the template and the names
    /// the output parser accepts. A client tool named like a built-in one is a 400 (the server
    /// would answer its calls itself).
    pub fn offered(&self, client: &ClientTools) -> Result<(Vec<Value>, Vec<String>), ApiError> {
        if let Some(n) = client.names.iter().find(|n| self.lp.is_builtin(n)) {
            return Err(ApiError::invalid(format!(
                "tool name {n:?} is reserved for a built-in tool of this server"
            )));
        }
        let builtin = self.lp.definitions();
        let mut defs = client.defs.clone();
        defs.extend(builtin.iter().map(|t| t.to_openai()));
        let mut names = client.names.clone();
        names.extend(builtin.iter().map(|t| t.name.to_string()));
        Ok((defs, names))
    }

    /// Runs the loop on `messages` (already with any system note). `make_req` turns a rendered
    /// prompt into the surface's generation request (sampling, limits, stop strings); the loop
    /// asks for one choice without logprobs. `out`, when given, receives the [`Activity`];
    /// once it is closed (the client went away) the run stops at the next generated piece.
    pub async fn run<R>(
        &self,
        m: &Leased,
        messages: &[Message],
        client: &ClientTools,
        make_req: R,
        out: Option<UnboundedSender<Step>>,
    ) -> Result<Outcome, ApiError>
    where
        R: Fn(&Leased, Vec<u32>) -> Result<GenRequest, ApiError> + Sync,
    {
        let (defs, names) = self.offered(client)?;
        let (ptx, mut prx) = unbounded_channel::<Progress>();
        let closed = {
            let out = out.clone();
            move || out.as_ref().is_some_and(UnboundedSender::is_closed)
        };
        let summaries = std::sync::Mutex::new(Vec::<Summary>::new());
        let looped = async {
            // Owned by this block (not borrowed from the function), so every sender is gone
            // when the loop ends and `record` below sees the end of the channel.
            let ptx = ptx;
            let events = ptx.clone();
            // The turn's future is boxed as `Send` and borrows nothing of `rounds` (the
            // transcript is built first): an `async` closure's future would carry the
            // higher-ranked borrow, and rustc then cannot prove the handler's future `Send`.
            let turn = |rounds: &[Round<Reply>], last: bool| {
                let t = TurnInput {
                    m,
                    convo: transcript(messages, rounds),
                    // At the round limit the model must answer: no tools offered, no calls parsed.
                    tools: (!last).then_some((defs.as_slice(), names.as_slice())),
                    make_req: &make_req,
                    text: ptx.clone(),
                    closed: &closed,
                    summaries: &summaries,
                };
                t.run()
            };
            let on_event = move |e: LoopEvent<'_>| {
                let p = match e {
                    LoopEvent::Running { round, call } => Progress::Running(round, call.clone()),
                    LoopEvent::Finished {
                        round,
                        call,
                        result,
                        seconds,
                    } => Progress::Finished(round, call.clone(), result.clone(), seconds),
                };
                let _ = events.send(p);
            };
            self.lp.run(turn, on_event).await
        };
        let record = async {
            let mut executed = Vec::new();
            while let Some(p) = prx.recv().await {
                let a = match p {
                    Progress::Text(t) => Activity::Text(t),
                    Progress::Writing(tool, text) => Activity::Writing { tool, text },
                    Progress::Running(round, call) => Activity::Running {
                        round,
                        detail: running_detail(&call),
                        call,
                    },
                    Progress::Finished(round, call, result, seconds) => {
                        let files = self.save(&result).await;
                        let e = executed_call(round, &call, &result, seconds, files);
                        executed.push(e.clone());
                        Activity::Finished(e)
                    }
                };
                if let Some(o) = &out {
                    let _ = o.send(Step::Activity(a));
                }
            }
            executed
        };
        let (outcome, executed) = tokio::join!(looped, record);
        let outcome = outcome?;
        let summaries = std::mem::take(&mut *lock(&summaries));
        let end = match outcome.end {
            LoopEnd::Final(r) => End::Final(r),
            LoopEnd::ClientCalls { mut message, calls } => {
                message.calls = calls;
                End::ClientCalls(message)
            }
            // The last turn offers no tools, so it always answers; should the loop stop
            // anyway, the last round's text is the answer.
            LoopEnd::RoundLimit => {
                let mut r = outcome
                    .rounds
                    .last()
                    .map(|r| r.message.clone())
                    .ok_or_else(|| ApiError::internal("the tool loop ended without a turn"))?;
                r.calls.clear();
                End::Final(r)
            }
        };
        Ok(Outcome {
            end,
            executed,
            summaries,
        })
    }

    /// Runs the loop in a task of its own (for a streamed response): the receiver yields the
    /// [`Activity`], then [`Step::End`]. The task owns the lease (the model stays loaded) and
    /// the workspace, which it deletes at the end; dropping the receiver stops the run.
    pub fn spawn(
        self,
        m: Leased,
        messages: Vec<Message>,
        client: ClientTools,
        make_req: MakeRequest,
    ) -> UnboundedReceiver<Step> {
        let (tx, rx) = unbounded_channel();
        let run = async move {
            let end = self
                .run(&m, &messages, &client, make_req, Some(tx.clone()))
                .await;
            let _ = tx.send(Step::End(end));
            self.finish().await;
        };
        // The request's context goes with the task inside the lease: moderation, the request
        // log and metering against the key and tenant follow it.
        drop(tokio::spawn(run));
        rx
    }

    /// Ends the agent: a request's workspace folder is deleted here, on the blocking pool
    /// (a session's stays with its session).
    pub async fn finish(self) {
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }

    /// Copies the files a call wrote to the artifact store (on the blocking pool). A failure
    /// to save is logged and the call listed without files: the answer matters more.
    async fn save(&self, result: &ToolResult) -> Vec<FileLink> {
        if result.files.is_empty() {
            return Vec::new();
        }
        let store = self.artifacts.clone();
        let ws = self.lp.workspace.clone();
        let files = result.files.clone();
        match tokio::task::spawn_blocking(move || store.save(&ws, &files)).await {
            Ok(Ok(run)) => run.files.iter().map(FileLink::from).collect(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "saving a tool call's files as artifacts failed");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "saving a tool call's files as artifacts panicked");
                Vec::new()
            }
        }
    }
}

/// What one turn of [`Agent::run`] works with.
struct TurnInput<'s, R, C> {
    m: &'s Leased,
    convo: Vec<Message>,
    /// Definitions for the template and names for the parser; None at the round limit.
    tools: Option<(&'s [Value], &'s [String])>,
    make_req: &'s R,
    text: UnboundedSender<Progress>,
    closed: &'s C,
    summaries: &'s std::sync::Mutex<Vec<Summary>>,
}

impl<'s, R, C> TurnInput<'s, R, C>
where
    R: Fn(&Leased, Vec<u32>) -> Result<GenRequest, ApiError> + Sync,
    C: Fn() -> bool + Sync,
{
    fn run(self) -> BoxFuture<'s, Result<Turn<Reply>, ApiError>> {
        Box::pin(async move {
            let defs = self.tools.map(|t| t.0);
            let think = generate::Think::default();
            let prompt = generate::chat_prompt(self.m, &self.convo, defs, "", &think)?;
            let mut req = (self.make_req)(self.m, prompt.ids)?;
            req.n = 1;
            req.logprobs = None;
            let names = self.tools.map(|t| t.1);
            let reply = generate_turn(self.m, req, names, &self.text, self.closed).await?;
            lock(self.summaries).push(reply.summary.clone());
            Ok(match reply.calls.is_empty() {
                true => Turn::Final(reply),
                false => Turn::Calls {
                    calls: reply.calls.clone(),
                    message: reply,
                },
            })
        })
    }
}

/// One generation: content streamed as [`Progress::Text`] while calls are held back and
/// parsed at the end (`names`: the tools the parser accepts; None parses none).
async fn generate_turn(
    m: &Leased,
    req: GenRequest,
    names: Option<&[String]>,
    text: &UnboundedSender<Progress>,
    closed: &(impl Fn() -> bool + Sync),
) -> Result<Reply, ApiError> {
    let mut rx = generate::start(m, req)?;
    let mut held = names.map(|n| ToolStream::new(n.to_vec()));
    let mut content = String::new();
    let mut emit = |t: String| {
        if !t.is_empty() {
            content.push_str(&t);
            let _ = text.send(Progress::Text(t));
        }
    };
    while let Some((_, ev)) = rx.recv().await {
        match ev {
            Event::Started { .. } | Event::Queued { .. } => {}
            Event::Delta { text: t, .. } => {
                match held.as_mut() {
                    None => emit(t),
                    Some(ts) => {
                        let before = ts.pending_call().map_or(0, str::len);
                        emit(ts.push(&t));
                        if let Some(call) = ts.pending_call() {
                            let piece = call.get(before..).unwrap_or_default();
                            if !piece.is_empty() {
                                let name = parse::call_name(call);
                                let _ = text.send(Progress::Writing(name, piece.to_string()));
                            }
                        }
                    }
                }
                if closed() {
                    // Dropping `rx` cancels the generation.
                    return Err(ApiError::unavailable("the client went away"));
                }
            }
            Event::Done(summary) => {
                let (tail, calls) = held.as_mut().map(ToolStream::finish).unwrap_or_default();
                emit(tail);
                let calls = calls.into_iter().map(with_id).collect();
                return Ok(Reply {
                    content,
                    calls,
                    summary,
                });
            }
            Event::Failed(f) => return Err(f.into()),
        }
    }
    Err(ApiError::unavailable("the scheduler stopped"))
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn with_id(c: parse::ToolCall) -> ToolCall {
    ToolCall {
        id: format!("call_{}", ids::unique()),
        name: c.name,
        arguments: c.arguments,
    }
}

/// The conversation for the next turn: the request's messages, then each round's assistant
/// message (content and calls) and one `tool` message per result.
pub fn transcript(messages: &[Message], rounds: &[Round<Reply>]) -> Vec<Message> {
    let mut out = messages.to_vec();
    for r in rounds {
        out.push(assistant_message(&r.message.content, &r.calls));
        out.extend(
            r.calls
                .iter()
                .zip(&r.results)
                .map(|(c, res)| tool_message(c, res)),
        );
    }
    out
}

/// An assistant message with tool calls (content null when there is none, as OpenAI sends).
pub fn assistant_message(content: &str, calls: &[ToolCall]) -> Message {
    Message {
        role: "assistant".into(),
        content: (!content.trim().is_empty()).then(|| Content::Text(content.to_string())),
        tool_calls: Some(
            calls
                .iter()
                .map(|c| chat::ToolCall {
                    id: Some(c.id.clone()),
                    kind: "function".into(),
                    function: chat::FunctionCall {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                })
                .collect(),
        ),
        ..Default::default()
    }
}

/// The `tool` message carrying one result back to the model.
pub fn tool_message(call: &ToolCall, result: &ToolResult) -> Message {
    Message {
        role: "tool".into(),
        content: Some(Content::Text(result.content.clone())),
        tool_call_id: Some(call.id.clone()),
        name: Some(call.name.clone()),
        ..Default::default()
    }
}

/// What a call is about to work on, for the chat-UI `running` frame (the sandbox's own
/// detail comes with the result).
pub fn running_detail(call: &ToolCall) -> Option<String> {
    let args: Value = match &call.arguments {
        Value::String(s) => serde_json::from_str(s).ok()?,
        v => v.clone(),
    };
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    match call.name.as_str() {
        "run_python" | "run_javascript" => {
            let lang = call.name.trim_start_matches("run_");
            let code = s("code").unwrap_or_default();
            Some(format!("{lang} · {} bytes of code", code.len()))
        }
        "skills_read" => s("path").or_else(|| s("name")),
        "apply_patch" => None,
        _ => s("path"),
    }
}

/// The reply record of one executed call.
pub fn executed_call(
    round: usize,
    call: &ToolCall,
    result: &ToolResult,
    seconds: f64,
    files: Vec<FileLink>,
) -> ExecutedCall {
    let arguments = match &call.arguments {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| call.arguments.clone()),
        v => v.clone(),
    };
    ExecutedCall {
        round,
        id: call.id.clone(),
        name: call.name.clone(),
        arguments,
        ok: result.ok,
        output: excerpt(&result.content, OUTPUT_EXCERPT),
        detail: result.detail.clone(),
        skill: result.skill.clone(),
        seconds: (seconds * 1000.0).round() / 1000.0,
        files,
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn excerpt(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Summaries added up (the `finish` of the last; an empty list is an empty summary).
pub fn total(sums: &[Summary]) -> Summary {
    let mut t = match sums.last() {
        Some(s) => s.clone(),
        None => return zero(),
    };
    let others = &sums[..sums.len() - 1];
    for s in others {
        t.prompt_tokens += s.prompt_tokens;
        t.cached_tokens += s.cached_tokens;
        t.completion_tokens += s.completion_tokens;
        t.queue_secs += s.queue_secs;
        t.prompt_secs += s.prompt_secs;
        t.gen_secs += s.gen_secs;
    }
    t
}

fn zero() -> Summary {
    Summary {
        finish: weft_core::scheduler::Finish::Stop,
        prompt_tokens: 0,
        cached_tokens: 0,
        completion_tokens: 0,
        queue_secs: 0.0,
        prompt_secs: 0.0,
        gen_secs: 0.0,
        seed: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: args,
        }
    }

    fn result(content: &str) -> ToolResult {
        ToolResult {
            name: "run_python".into(),
            ok: true,
            content: content.into(),
            files: vec![],
            detail: Some("python · 5 bytes of code".into()),
            skill: None,
        }
    }

    #[test]
    fn rounds_render_as_assistant_calls_then_tool_messages() {
        let c = call("run_python", json!({"code": "print(1)"}));
        let round = Round {
            index: 1,
            message: Reply {
                content: String::new(),
                calls: vec![c.clone()],
                summary: zero(),
            },
            calls: vec![c],
            results: vec![result("{\"stdout\":\"1\\n\"}")],
        };
        let msgs = transcript(&[Message::user("go")], &[round]);
        assert_eq!(msgs.len(), 3);
        let a = msgs[1].to_template_json().unwrap();
        assert_eq!(
            a,
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": "run_python",
                "arguments": {"code": "print(1)"}}}]})
        );
        let t = msgs[2].to_template_json().unwrap();
        assert_eq!(
            t,
            json!({"role": "tool", "content": "{\"stdout\":\"1\\n\"}",
                "tool_call_id": "call_1", "name": "run_python"})
        );
    }

    #[test]
    fn executed_calls_carry_parsed_arguments_and_an_excerpt() {
        let c = call("run_python", Value::String("{\"code\": \"x\"}".into()));
        let long = "é".repeat(OUTPUT_EXCERPT);
        let files = vec![FileLink {
            name: "a.csv".into(),
            bytes: 3,
            url: "/api/code/artifacts/r/a.csv".into(),
        }];
        let e = executed_call(2, &c, &result(&long), 0.12345, files);
        assert_eq!(e.arguments, json!({"code": "x"}));
        assert!(e.output.len() <= OUTPUT_EXCERPT + '…'.len_utf8());
        assert_eq!(e.seconds, 0.123);
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["round"], 2);
        assert_eq!(v["files"][0]["url"], "/api/code/artifacts/r/a.csv");
        assert_eq!(v["ok"], true);
    }

    #[test]
    fn running_detail_names_what_the_call_works_on() {
        let py = call("run_python", json!({"code": "print(1)"}));
        assert_eq!(running_detail(&py).unwrap(), "python · 8 bytes of code");
        let rf = call("read_file", Value::String("{\"path\": \"a.txt\"}".into()));
        assert_eq!(running_detail(&rf).unwrap(), "a.txt");
        let sk = call("skills_read", json!({"name": "pdf"}));
        assert_eq!(running_detail(&sk).unwrap(), "pdf");
    }

    #[test]
    fn totals_add_every_turn_and_keep_the_last_finish() {
        let mut a = zero();
        a.prompt_tokens = 10;
        a.completion_tokens = 3;
        let mut b = zero();
        b.prompt_tokens = 20;
        b.completion_tokens = 4;
        b.finish = weft_core::scheduler::Finish::Length;
        let t = total(&[a, b]);
        assert_eq!((t.prompt_tokens, t.completion_tokens), (30, 7));
        assert_eq!(t.finish, weft_core::scheduler::Finish::Length);
    }
}
