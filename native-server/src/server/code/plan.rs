//! What one chat request gets from the server's code tools: which built-in tools are offered,
//! what goes into the system prompt, and which workspace the calls run in.
//!
//! Code tools are offered with `--code-exec` to models whose chat template renders tools; skill
//! tools when the request names skills. A model without tool support gets the named skills'
//! instructions inline in the system prompt instead (it could not call `skills_read`).

use std::sync::Arc;

use weft_core::chat::{Content, Message};
use weft_sandbox::skills::Skill;
use weft_sandbox::{ToolLoop, Workspace};

use super::agent::Agent;
use super::types::SkillFields;
use super::CodeTools;
use crate::server::error::ApiError;
use crate::server::leased::Leased;

/// Where a request's built-in calls run, and whose they are (the owner: the principal whose
/// artifacts the calls' files become; a session workspace is keyed by owner and session).
#[derive(Clone, Debug)]
pub enum Scope {
    /// A private workspace deleted after the response (OpenAI, Ollama), of this owner.
    Request(String),
    /// The chat-UI session's workspace (owner, session id), kept until the session is deleted.
    Session(String, String),
}

impl Scope {
    pub fn owner(&self) -> &str {
        match self {
            Scope::Request(o) | Scope::Session(o, _) => o,
        }
    }
}

/// The result of [`plan`].
pub struct Plan {
    /// Text to add to the system prompt (skills), if any.
    pub system: Option<String>,
    /// The tool loop, when the model is offered built-in tools.
    pub agent: Option<Agent>,
}

impl Plan {
    /// The conversation with [`Plan::system`] added.
    pub fn messages(&self, m: &Leased, messages: &[Message]) -> Vec<Message> {
        match &self.system {
            Some(note) => with_system_note(m.overrides.system.as_deref(), messages, note),
            None => messages.to_vec(),
        }
    }
}

/// Decides what the request gets. `tools_allowed` is false when the surface must not offer
/// tools at all (OpenAI `tool_choice: "none"` or a forced call, structured output). An unknown
/// skill name is a 400.
pub async fn plan(
    tools: &CodeTools,
    m: &Leased,
    fields: &SkillFields,
    scope: Scope,
    tools_allowed: bool,
) -> Result<Plan, ApiError> {
    let names = fields.skills.clone().unwrap_or_default();
    let discovery = fields.skills_discovery.unwrap_or(true);
    let capable = tools_allowed
        && m.facts
            .capabilities_with(m.overrides.template.as_deref())
            .tools;
    let code = capable && tools.sandbox.is_some();
    if code {
        tools.admit_code_request()?;
    }
    let skill_tools = capable && !names.is_empty();
    if names.is_empty() && !code {
        return Ok(Plan {
            system: None,
            agent: None,
        });
    }
    // Reading the skills folders and making a workspace touch the disk: off the async workers.
    let skills = tools.skills.clone();
    let want_workspace = code || skill_tools;
    let request_scope = matches!(scope, Scope::Request(_));
    let artifacts_dir = tools.artifacts_dir(scope.owner());
    let (selected, others, ws, artifacts) = tokio::task::spawn_blocking(move || {
        let selected = skills.select(&names)?;
        let others: Vec<Skill> = if discovery && skill_tools {
            skills
                .list()
                .skills
                .into_iter()
                .filter(|s| !selected.iter().any(|t| t.id == s.id))
                .collect()
        } else {
            Vec::new()
        };
        let ws = match want_workspace && request_scope {
            true => Some(Arc::new(Workspace::temporary()?)),
            false => None,
        };
        let artifacts = match want_workspace {
            true => Some(CodeTools::artifacts_in(artifacts_dir)?),
            false => None,
        };
        Ok::<_, weft_sandbox::Error>((selected, others, ws, artifacts))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    let system = match (selected.is_empty(), skill_tools) {
        (true, _) => None,
        (false, true) => Some(skills_note(&selected, &others)),
        (false, false) => Some(inline_note(&selected)),
    };
    if !want_workspace {
        return Ok(Plan {
            system,
            agent: None,
        });
    }
    let ws = match (ws, &scope) {
        (Some(ws), _) => ws,
        (None, Scope::Session(owner, sid)) => tools.session_workspace(owner, sid).await?,
        (None, Scope::Request(_)) => unreachable!("a request workspace is made above"),
    };
    let artifacts =
        artifacts.ok_or_else(|| ApiError::internal("no artifact store for the workspace"))?;
    let mut lp = ToolLoop::new(tools.loop_sandbox()?, ws);
    if skill_tools {
        lp = lp.with_skills(tools.skills.clone());
        if !discovery {
            // Without discovery the model sees only the skills the request named.
            lp.visible_skills = Some(
                selected
                    .iter()
                    .flat_map(|s| [s.id.clone(), s.name.clone()])
                    .collect(),
            );
        }
    }
    lp.tools.code = code;
    // Every surface's runs go through this loop: its slots bound them server-wide.
    lp.slots = Some(tools.runs.clone());
    Ok(Plan {
        system,
        agent: Some(Agent::new(lp, artifacts)),
    })
}

/// The system-prompt text for a tool-capable model: each skill's name and description; the
/// model reads the instructions with `skills_read` (progressive disclosure keeps the prompt
/// short).
pub fn skills_note(selected: &[Skill], others: &[Skill]) -> String {
    let line = |s: &Skill| format!("- {}: {}\n", s.id, s.description.trim());
    let mut t = String::from(
        "Skills are folders of instructions for particular tasks. Before you work on the task, \
         call skills_read with a skill's name to read its instructions, and follow them.\n\
         Skills selected for this request:\n",
    );
    t.extend(selected.iter().map(line));
    if !others.is_empty() {
        t.push_str("Other skills available (use one only if it fits the task):\n");
        t.extend(others.iter().map(line));
    }
    t
}

/// The system-prompt text for a model that cannot call tools: the selected skills' whole
/// instructions.
pub fn inline_note(selected: &[Skill]) -> String {
    let mut t = String::from("Follow the instructions of these skills:\n");
    for s in selected {
        t.push_str(&format!(
            "\n## Skill {}: {}\n\n{}\n",
            s.id,
            s.description.trim(),
            s.instructions.trim()
        ));
    }
    t
}

/// Adds `note` to the conversation's system message (or a new first one: the model name's
/// own system prompt, when it has one, followed by the note).
pub fn with_system_note(default: Option<&str>, messages: &[Message], note: &str) -> Vec<Message> {
    let mut out = messages.to_vec();
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            let text = first.text().ok().flatten().unwrap_or_default();
            let joined = if text.is_empty() {
                note.to_string()
            } else {
                format!("{text}\n\n{note}")
            };
            first.content = Some(Content::Text(joined));
        }
        _ => {
            let text = match default {
                Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
                _ => note.to_string(),
            };
            out.insert(0, Message::system(text));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_joins_the_system_message_or_becomes_one() {
        let msgs = vec![Message::system("Be brief."), Message::user("hi")];
        let out = with_system_note(None, &msgs, "NOTE");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].text().unwrap().unwrap(), "Be brief.\n\nNOTE");
        let out = with_system_note(Some("You are X."), &msgs[1..], "NOTE");
        assert_eq!(out[0].role, "system");
        assert_eq!(out[0].text().unwrap().unwrap(), "You are X.\n\nNOTE");
        assert_eq!(out[1].text().unwrap().unwrap(), "hi");
        let out = with_system_note(None, &msgs[1..], "NOTE");
        assert_eq!(out[0].text().unwrap().unwrap(), "NOTE");
    }
}
