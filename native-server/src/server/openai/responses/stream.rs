//! A streamed response: the scheduler's events turned into the Responses API's typed SSE
//! events, in OpenAI's order — `response.created`, `response.in_progress`; for the message
//! `response.output_item.added`, `response.content_part.added`, `response.output_text.delta`…,
//! `response.output_text.done`, `response.content_part.done`, `response.output_item.done`;
//! for each call `response.output_item.added`, `response.function_call_arguments.delta`,
//! `response.function_call_arguments.done`, `response.output_item.done`; then
//! `response.completed` (or `response.incomplete`) with the whole response and its usage. A
//! failure ends the stream with an `error` event.
//!
//! Text streams as it comes, except what may be a tool call (held back by [`ToolStream`] and
//! sent as call items at the end), so the deltas add up to the final text exactly.

use std::sync::{Arc, Mutex};

use axum::response::Response;
use futures_util::stream::{self, StreamExt};
use weft_core::scheduler::{Event as Gen, Summary};

use super::input::output_text;
use super::output::{self, cut_short};
use super::store::ResponseStore;
use super::types::{Event, Item, MessageItem, ResponseObject, StreamEvent};
use crate::server::common::tools::ToolStream;
use crate::server::error::ApiError;
use crate::server::generate::EventStream;
use crate::server::leased::Leased;
use crate::server::stream::{frames, sse_typed};

/// The events of one streamed response.
pub struct Events {
    draft: ResponseObject,
    seq: usize,
    /// Holds back tool calls, when tools were offered.
    tools: Option<ToolStream>,
    message_id: String,
    /// Whether the message item has been announced.
    open: bool,
    /// The text streamed so far.
    text: String,
}

impl Events {
    /// Events for `draft` (the in-progress response); `tools`: the offered tools' names.
    pub fn new(draft: ResponseObject, tools: Option<Vec<String>>) -> Self {
        Events {
            draft,
            seq: 0,
            tools: tools.map(ToolStream::new),
            message_id: output::message_id(),
            open: false,
            text: String::new(),
        }
    }

    fn push(&mut self, out: &mut Vec<StreamEvent>, event: Event) {
        out.push(StreamEvent {
            event,
            sequence_number: self.seq,
        });
        self.seq += 1;
    }

    /// `response.created` and `response.in_progress`, sent before generation starts.
    pub fn start(&mut self) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        let r = Box::new(self.draft.clone());
        self.push(
            &mut out,
            Event::Created {
                response: r.clone(),
            },
        );
        self.push(&mut out, Event::InProgress { response: r });
        out
    }

    /// Announces the message item and its text part, once.
    fn open(&mut self, out: &mut Vec<StreamEvent>) {
        if std::mem::replace(&mut self.open, true) {
            return;
        }
        let item = Item::Message(MessageItem {
            id: self.message_id.clone(),
            role: "assistant".into(),
            status: "in_progress",
            content: Vec::new(),
        });
        self.push(
            out,
            Event::ItemAdded {
                output_index: 0,
                item,
            },
        );
        let e = Event::PartAdded {
            item_id: self.message_id.clone(),
            output_index: 0,
            content_index: 0,
            part: output_text(""),
        };
        self.push(out, e);
    }

    fn text(&mut self, out: &mut Vec<StreamEvent>, text: String) {
        if text.is_empty() {
            return;
        }
        self.open(out);
        self.text.push_str(&text);
        let e = Event::TextDelta {
            item_id: self.message_id.clone(),
            output_index: 0,
            content_index: 0,
            delta: text,
            logprobs: Vec::new(),
        };
        self.push(out, e);
    }

    /// Generated text.
    pub fn delta(&mut self, text: &str) -> Vec<StreamEvent> {
        let text = match self.tools.as_mut() {
            Some(ts) => ts.push(text),
            None => text.to_string(),
        };
        let mut out = Vec::new();
        self.text(&mut out, text);
        out
    }

    /// The end of generation: the items closed, the calls sent, and the finished response
    /// (also returned, to be stored).
    pub fn done(&mut self, s: &Summary) -> (Vec<StreamEvent>, ResponseObject) {
        let mut out = Vec::new();
        let (tail, calls) = self
            .tools
            .as_mut()
            .map(ToolStream::finish)
            .unwrap_or_default();
        self.text(&mut out, tail);
        let items = output::items(&self.message_id, &self.text, &calls, cut_short(s));
        for (i, item) in items.iter().enumerate() {
            match item {
                Item::Message(m) => self.close_message(&mut out, m),
                Item::FunctionCall(c) => {
                    let added = Item::FunctionCall(super::types::FunctionCallItem {
                        arguments: String::new(),
                        status: "in_progress",
                        ..c.clone()
                    });
                    self.push(
                        &mut out,
                        Event::ItemAdded {
                            output_index: i,
                            item: added,
                        },
                    );
                    let e = Event::ArgumentsDelta {
                        item_id: c.id.clone(),
                        output_index: i,
                        delta: c.arguments.clone(),
                    };
                    self.push(&mut out, e);
                    let e = Event::ArgumentsDone {
                        item_id: c.id.clone(),
                        output_index: i,
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    };
                    self.push(&mut out, e);
                }
                Item::FunctionCallOutput(_) => {}
            }
            self.push(
                &mut out,
                Event::ItemDone {
                    output_index: i,
                    item: item.clone(),
                },
            );
        }
        let r = output::finished(&self.draft, items, s);
        let response = Box::new(r.clone());
        let last = if r.status == "completed" {
            Event::Completed { response }
        } else {
            Event::Incomplete { response }
        };
        self.push(&mut out, last);
        (out, r)
    }

    /// The message's text and part done (announcing it first when no text came).
    fn close_message(&mut self, out: &mut Vec<StreamEvent>, m: &MessageItem) {
        self.open(out);
        let e = Event::TextDone {
            item_id: m.id.clone(),
            output_index: 0,
            content_index: 0,
            text: self.text.clone(),
            logprobs: Vec::new(),
        };
        self.push(out, e);
        let e = Event::PartDone {
            item_id: m.id.clone(),
            output_index: 0,
            content_index: 0,
            part: output_text(&self.text),
        };
        self.push(out, e);
    }

    /// Generation failed: the `error` event that ends the stream.
    pub fn failed(&mut self, e: ApiError) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        let e = Event::Error {
            code: e.code.map(str::to_string),
            message: e.message,
            param: None,
        };
        self.push(&mut out, e);
        out
    }
}

/// An event as an SSE frame: its `type` as the event name, itself as the data.
fn frame(e: StreamEvent) -> (String, String) {
    let v = serde_json::to_value(&e).unwrap_or_default();
    let name = v["type"].as_str().unwrap_or("error").to_string();
    (name, v.to_string())
}

/// Where a finished response is stored: the store, its owner and the input it answered.
pub struct Keep {
    pub store: Arc<ResponseStore>,
    pub owner: String,
    pub input: Vec<Item>,
}

/// The SSE response. The closure owns the lease, so the model stays loaded until the stream
/// ends; the client going away drops the stream and so cancels generation. `keep`: where to
/// store the finished response; it is written before the stream's last events are sent, so
/// a client that saw `response.completed` can retrieve the response.
pub fn respond(m: Leased, rx: EventStream, mut events: Events, keep: Option<Keep>) -> Response {
    let first = events.start();
    // The finished response waits here for the write (the closure below cannot await).
    let done: Arc<Mutex<Option<ResponseObject>>> = Arc::default();
    let finished = done.clone();
    let f = move |ev: Option<(usize, Gen)>| -> (Vec<StreamEvent>, bool) {
        let _model = &m;
        match ev {
            None => (
                events.failed(ApiError::unavailable("the scheduler stopped")),
                true,
            ),
            Some((_, Gen::Started { .. } | Gen::Queued { .. })) => (vec![], false),
            Some((_, Gen::Delta { text, .. })) => (events.delta(&text), false),
            Some((_, Gen::Done(s))) => {
                let (out, response) = events.done(&s);
                *finished.lock().unwrap_or_else(|p| p.into_inner()) = Some(response);
                (out, true)
            }
            Some((_, Gen::Failed(f))) => (events.failed(f.into()), true),
        }
    };
    let mut keep = keep;
    let stored = move |e: StreamEvent| {
        let response = done.lock().unwrap_or_else(|p| p.into_inner()).take();
        // Taken only with the finished response, so the write happens once, right then.
        let write = response.and_then(|r| keep.take().map(|k| (r, k)));
        async move {
            if let Some((response, k)) = write {
                if let Err(err) = k.store.put(&k.owner, &response, &k.input).await {
                    tracing::error!(id = %response.id, error = %err.message, "storing a streamed response");
                }
            }
            e
        }
    };
    sse_typed(
        stream::iter(first)
            .chain(frames(rx, f))
            .then(stored)
            .map(frame),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::scheduler::Finish;

    fn summary(finish: Finish) -> Summary {
        Summary {
            finish,
            prompt_tokens: 10,
            cached_tokens: 4,
            completion_tokens: 3,
            queue_secs: 0.0,
            prompt_secs: 0.0,
            gen_secs: 0.0,
            seed: 0,
        }
    }

    fn run(tools: Option<Vec<String>>, pieces: &[&str], finish: Finish) -> Vec<serde_json::Value> {
        let mut ev = Events::new(super::super::create::sample_draft(), tools);
        let mut out = ev.start();
        for p in pieces {
            out.extend(ev.delta(p));
        }
        let (end, _) = ev.done(&summary(finish));
        out.extend(end);
        out.into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect()
    }

    fn types(evs: &[serde_json::Value]) -> Vec<&str> {
        evs.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn text_events_come_in_order_and_the_deltas_are_the_text() {
        let evs = run(None, &["Hel", "", "lo"], Finish::Stop);
        assert_eq!(
            types(&evs),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let seq: Vec<u64> = evs
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(seq, (0..evs.len() as u64).collect::<Vec<_>>());
        assert_eq!(evs[6]["text"], "Hello");
        let last = &evs[9]["response"];
        assert_eq!(last["status"], "completed");
        assert_eq!(last["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(last["output"][0]["id"], evs[2]["item"]["id"]);
        assert_eq!(last["usage"]["input_tokens_details"]["cached_tokens"], 4);
        assert_eq!(last["usage"]["total_tokens"], 13);
        assert_eq!(evs[0]["response"]["status"], "in_progress");
    }

    #[test]
    fn calls_follow_the_text_and_a_cut_reply_is_incomplete() {
        let names = Some(vec!["get_weather".to_string()]);
        let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        let evs = run(names.clone(), &["<tool", &call[5..]], Finish::Stop);
        assert_eq!(
            types(&evs)[2..],
            [
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert_eq!(evs[2]["item"]["type"], "function_call");
        assert_eq!(evs[2]["output_index"], 0);
        let args: serde_json::Value =
            serde_json::from_str(evs[4]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["city"], "Paris");
        assert_eq!(
            evs[5]["item"]["call_id"],
            evs[6]["response"]["output"][0]["call_id"]
        );

        let evs = run(names, &["Sure. ", call], Finish::Stop);
        let t = types(&evs);
        assert_eq!(t[4], "response.output_text.delta");
        assert_eq!(evs[4]["delta"], "Sure. ");
        assert_eq!(
            t[7..9],
            ["response.output_item.done", "response.output_item.added"]
        );
        assert_eq!(evs[8]["output_index"], 1);

        let mut ev = Events::new(super::super::create::sample_draft(), None);
        let n = ev.start().len() + ev.delta("Hi").len();
        let err = serde_json::to_value(&ev.failed(ApiError::internal("boom"))[0]).unwrap();
        assert_eq!(err["type"], "error");
        assert_eq!(err["message"], "boom");
        assert_eq!(err["code"], "internal_error");
        assert_eq!(err["sequence_number"], n);

        let evs = run(None, &[], Finish::Length);
        assert_eq!(types(&evs).last(), Some(&"response.incomplete"));
        let r = &evs.last().unwrap()["response"];
        assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(r["output"][0]["status"], "incomplete");
        assert_eq!(r["output"][0]["content"][0]["text"], "");
    }
}
