//! The server-side tool loop: ask the model for a turn, execute the built-in tool calls it made
//! in the request's workspace, hand the results back, and repeat until it answers, calls a tool
//! the client owns, or reaches the round limit.
//!
//! The loop knows nothing of chat templates or HTTP: the caller's `turn` function renders the
//! conversation (its own messages plus every [`Round`] so far: the assistant message with its
//! tool calls, then one tool message per result) and runs one generation. `last` tells it the
//! round limit is reached, so it should generate without offering tools.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::skills::SkillRegistry;
use crate::slots::RunSlot;
use crate::tools::{self, ToolContext, ToolResult, ToolSet, ToolSpec};
use crate::{Limits, RunSlots, Sandbox, Workspace};

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The call's id (echoed in the tool message).
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments: an object, or a JSON string holding one.
    pub arguments: Value,
}

/// What one model turn produced. `A` is the caller's assistant message type.
#[derive(Clone, Debug)]
pub enum Turn<A> {
    /// A final answer (no tool calls).
    Final(A),
    /// An assistant message with tool calls.
    Calls {
        /// The assistant message as generated (content and calls), for the conversation.
        message: A,
        /// The calls, in order.
        calls: Vec<ToolCall>,
    },
}

/// One executed round: the model's message, its calls, and their results (same order).
#[derive(Clone, Debug)]
pub struct Round<A> {
    /// 1-based round number.
    pub index: usize,
    /// The assistant message.
    pub message: A,
    /// The built-in calls executed this round.
    pub calls: Vec<ToolCall>,
    /// Their results.
    pub results: Vec<ToolResult>,
}

/// How the loop ended.
#[derive(Clone, Debug)]
pub enum LoopEnd<A> {
    /// The model answered.
    Final(A),
    /// The model called tools the client defined: return them to the client as usual. Built-in
    /// calls of that turn were executed first (they are in the last round).
    ClientCalls {
        /// The assistant message.
        message: A,
        /// The client's calls.
        calls: Vec<ToolCall>,
    },
    /// Still calling tools after the last round: the caller decides what to answer.
    RoundLimit,
}

/// The loop's result.
#[derive(Clone, Debug)]
pub struct LoopOutcome<A> {
    /// How it ended.
    pub end: LoopEnd<A>,
    /// Every executed round.
    pub rounds: Vec<Round<A>>,
}

/// Progress, for streaming frames (chat UI: `tool_progress` running/finished, `skill_step`).
#[derive(Debug)]
pub enum LoopEvent<'e> {
    /// A built-in call is about to run.
    Running {
        /// The round.
        round: usize,
        /// The call.
        call: &'e ToolCall,
    },
    /// A built-in call finished.
    Finished {
        /// The round.
        round: usize,
        /// The call.
        call: &'e ToolCall,
        /// Its result.
        result: &'e ToolResult,
        /// Seconds it took.
        seconds: f64,
    },
}

/// A configured loop for one request.
#[derive(Clone)]
pub struct ToolLoop {
    /// The sandbox.
    pub sandbox: Arc<Sandbox>,
    /// The request's workspace (per HTTP request, or per chat session).
    pub workspace: Arc<Workspace>,
    /// Skills, when enabled.
    pub skills: Option<Arc<SkillRegistry>>,
    /// The skills the model may list and read (ids or names); None: every skill.
    pub visible_skills: Option<Vec<String>>,
    /// Which built-in tools are offered and executed.
    pub tools: ToolSet,
    /// Limits for each code run.
    pub limits: Limits,
    /// Rounds of tool calls before the model must answer.
    pub max_rounds: usize,
    /// Bytes of each output fed back to the model.
    pub feedback_bytes: usize,
    /// Slots shared with other loops that bound code runs at once (None: unbounded).
    pub slots: Option<RunSlots>,
}

impl ToolLoop {
    /// A loop with code and skill tools, default limits and 8 rounds.
    pub fn new(sandbox: Arc<Sandbox>, workspace: Arc<Workspace>) -> Self {
        ToolLoop {
            sandbox,
            workspace,
            skills: None,
            visible_skills: None,
            tools: ToolSet {
                code: true,
                skills: false,
            },
            limits: Limits::default(),
            max_rounds: 8,
            feedback_bytes: 16 << 10,
            slots: None,
        }
    }

    /// The same loop with skills enabled.
    pub fn with_skills(mut self, skills: Arc<SkillRegistry>) -> Self {
        self.skills = Some(skills);
        self.tools.skills = true;
        self
    }

    /// The tools to offer the model (merge with the client's own tools).
    pub fn definitions(&self) -> Vec<ToolSpec> {
        tools::definitions(self.tools)
    }

    /// True when `name` is a built-in tool this loop executes.
    pub fn is_builtin(&self, name: &str) -> bool {
        tools::is_builtin(self.tools, name)
    }

    /// The run slot a call needs: a code run (`run_python`, `run_javascript`) takes one of
    /// [`ToolLoop::slots`], waiting at most its own timeout for one to free up; other calls
    /// need none. When none frees up in time, the call's result saying so (for the model).
    async fn slot_for(&self, call: &ToolCall) -> std::result::Result<Option<RunSlot>, ToolResult> {
        let Some(slots) = &self.slots else {
            return Ok(None);
        };
        if !matches!(call.name.as_str(), "run_python" | "run_javascript") {
            return Ok(None);
        }
        match slots.take(self.limits.timeout).await {
            Some(slot) => Ok(Some(slot)),
            None => Err(ToolResult {
                name: call.name.clone(),
                ok: false,
                content: serde_json::json!({"error": format!(
                    "the code sandbox is busy ({} runs at once); try again later",
                    slots.size()
                )})
                .to_string(),
                files: Vec::new(),
                detail: None,
                skill: None,
            }),
        }
    }

    /// Executes one built-in call on the blocking pool (needs a tokio runtime).
    pub async fn execute(&self, call: &ToolCall) -> Result<ToolResult> {
        self.execute_holding(call, None).await
    }

    /// Executes a call holding `slot` until the call itself ends: on the blocking pool, so a
    /// request that goes away mid-run frees the slot only when its guest has stopped.
    async fn execute_holding(&self, call: &ToolCall, slot: Option<RunSlot>) -> Result<ToolResult> {
        let this = self.clone();
        let call = call.clone();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let ctx = ToolContext {
                sandbox: &this.sandbox,
                workspace: &this.workspace,
                skills: this.skills.as_deref(),
                visible_skills: this.visible_skills.as_deref(),
                limits: this.limits.clone(),
                tools: this.tools,
                feedback_bytes: this.feedback_bytes,
            };
            tools::execute(&ctx, &call.name, &call.arguments)
        })
        .await
        .map_err(|e| Error::Model(format!("a tool call panicked or was cancelled: {e}")))?
    }

    /// Runs the loop. `turn(rounds, last)` returns a future generating one model turn from the
    /// conversation so far; `on_event` sees each call start and finish. Errors from `turn` end
    /// the loop.
    ///
    /// `turn` is a closure returning a future (render the conversation from `rounds` before
    /// the future, which then owns it) rather than an `async` closure: the future of an
    /// `async` closure borrows the higher-ranked `rounds`, and rustc then cannot prove the
    /// loop's future `Send`, which a server handler or `tokio::spawn` needs.
    pub async fn run<A, E, F, Fut>(
        &self,
        mut turn: F,
        mut on_event: impl FnMut(LoopEvent<'_>),
    ) -> std::result::Result<LoopOutcome<A>, E>
    where
        A: Clone,
        E: From<Error>,
        F: FnMut(&[Round<A>], bool) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<Turn<A>, E>>,
    {
        let mut rounds: Vec<Round<A>> = Vec::new();
        loop {
            let last = rounds.len() >= self.max_rounds;
            let (message, calls) = match turn(&rounds, last).await? {
                Turn::Final(a) => {
                    return Ok(LoopOutcome {
                        end: LoopEnd::Final(a),
                        rounds,
                    })
                }
                Turn::Calls { message, calls } => (message, calls),
            };
            if last {
                return Ok(LoopOutcome {
                    end: LoopEnd::RoundLimit,
                    rounds,
                });
            }
            let (builtin, client): (Vec<ToolCall>, Vec<ToolCall>) =
                calls.into_iter().partition(|c| self.is_builtin(&c.name));
            let index = rounds.len() + 1;
            let mut results = Vec::with_capacity(builtin.len());
            for call in &builtin {
                // A code run waits for a free slot before it is reported as running.
                let slot = match self.slot_for(call).await {
                    Ok(slot) => slot,
                    Err(busy) => {
                        on_event(LoopEvent::Running { round: index, call });
                        on_event(LoopEvent::Finished {
                            round: index,
                            call,
                            result: &busy,
                            seconds: 0.0,
                        });
                        results.push(busy);
                        continue;
                    }
                };
                on_event(LoopEvent::Running { round: index, call });
                let t0 = Instant::now();
                let result = self.execute_holding(call, slot).await?;
                on_event(LoopEvent::Finished {
                    round: index,
                    call,
                    result: &result,
                    seconds: t0.elapsed().as_secs_f64(),
                });
                results.push(result);
            }
            let had_builtin = !builtin.is_empty();
            if had_builtin {
                rounds.push(Round {
                    index,
                    message: message.clone(),
                    calls: builtin,
                    results,
                });
            }
            if !client.is_empty() {
                return Ok(LoopOutcome {
                    end: LoopEnd::ClientCalls {
                        message,
                        calls: client,
                    },
                    rounds,
                });
            }
            if !had_builtin {
                // A Calls turn with no calls at all is an answer.
                return Ok(LoopOutcome {
                    end: LoopEnd::Final(message),
                    rounds,
                });
            }
        }
    }
}
