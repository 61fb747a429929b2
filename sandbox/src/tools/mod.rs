//! Executing one built-in tool call in a workspace.
//!
//! [`execute`] never fails as a Rust call for the model's mistakes: a bad path, a missing file or
//! an exception in the code comes back as a [`ToolResult`] with `ok: false` and an error text the
//! model can act on. Only the host failing (I/O, wasmtime) is an `Err`.

mod definitions;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::skills::SkillRegistry;
use crate::workspace::{FileInfo, Workspace};
use crate::{Language, Limits, RunRequest, Sandbox, Source};
pub use definitions::{definitions, is_builtin, ToolSet, ToolSpec, CODE_TOOLS, SKILL_TOOLS};

/// What tool calls run against.
pub struct ToolContext<'a> {
    /// The sandbox for `run_python` / `run_javascript`.
    pub sandbox: &'a Sandbox,
    /// The request's workspace.
    pub workspace: &'a Workspace,
    /// Skills for `skills_list` / `skills_read`, if enabled.
    pub skills: Option<&'a SkillRegistry>,
    /// The skills `skills_list` / `skills_read` may show (ids or names); None: every skill.
    /// A request that names its skills and turns discovery off sees only those.
    pub visible_skills: Option<&'a [String]>,
    /// Limits for each run.
    pub limits: Limits,
    /// Which tools are enabled.
    pub tools: ToolSet,
    /// Bytes of stdout / stderr / file text fed back to the model per call (the rest is cut,
    /// with a note): small models have small contexts.
    pub feedback_bytes: usize,
}

impl<'a> ToolContext<'a> {
    /// A context with default limits, all tools, and 16 KiB of feedback per stream.
    pub fn new(sandbox: &'a Sandbox, workspace: &'a Workspace) -> Self {
        ToolContext {
            sandbox,
            workspace,
            skills: None,
            visible_skills: None,
            limits: Limits::default(),
            tools: ToolSet::ALL,
            feedback_bytes: 16 << 10,
        }
    }
}

/// The result of one tool call.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ToolResult {
    /// The tool's name.
    pub name: String,
    /// False when the call failed (bad arguments, an error, a non-zero exit).
    pub ok: bool,
    /// The text fed back to the model (a JSON object).
    pub content: String,
    /// Files the call created or changed, for artifacts (`{name, bytes}` in the chat-UI frame).
    pub files: Vec<FileInfo>,
    /// What the call acted on (a path, a skill file), for the chat-UI `skill_step` frame.
    pub detail: Option<String>,
    /// The skill involved, for skill tools.
    pub skill: Option<String>,
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[... {} more bytes cut]", &s[..end], s.len() - end)
}

/// Parses arguments given either as an object or as a JSON string (OpenAI sends a string).
fn arguments(raw: &Value) -> Result<serde_json::Map<String, Value>> {
    let v = match raw {
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(s)
            .map_err(|e| Error::ToolCall(format!("arguments are not valid JSON: {e}")))?,
        Value::Null => json!({}),
        other => other.clone(),
    };
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(Error::ToolCall("arguments must be a JSON object".into())),
    }
}

fn string<'v>(args: &'v serde_json::Map<String, Value>, key: &str) -> Result<&'v str> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Error::ToolCall(format!("`{key}` must be a string"))),
        None => Err(Error::ToolCall(format!("`{key}` is required"))),
    }
}

fn opt_string<'v>(args: &'v serde_json::Map<String, Value>, key: &str) -> Result<Option<&'v str>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::ToolCall(format!("`{key}` must be a string"))),
    }
}

fn flag(args: &serde_json::Map<String, Value>, key: &str) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// Runs one built-in tool call. Model-side failures come back as `ok: false`.
pub fn execute(ctx: &ToolContext<'_>, name: &str, raw_arguments: &Value) -> Result<ToolResult> {
    let mut result = ToolResult {
        name: name.to_string(),
        ok: true,
        content: String::new(),
        files: Vec::new(),
        detail: None,
        skill: None,
    };
    let outcome = if !is_builtin(ctx.tools, name) {
        Err(Error::ToolCall(format!(
            "there is no built-in tool named {name:?}"
        )))
    } else {
        arguments(raw_arguments).and_then(|args| dispatch(ctx, name, &args, &mut result))
    };
    match outcome {
        Ok(v) => result.content = v.to_string(),
        // The sandbox itself being unusable is the host's failure; anything else (including an
        // I/O error on a path the model chose) is fed back for the model to act on.
        Err(
            e @ (Error::RuntimeMissing { .. } | Error::RuntimeMismatch { .. } | Error::Wasmtime(_)),
        ) => return Err(e),
        Err(e) => {
            result.ok = false;
            result.content = json!({"error": e.to_string()}).to_string();
        }
    }
    Ok(result)
}

fn dispatch(
    ctx: &ToolContext<'_>,
    name: &str,
    args: &serde_json::Map<String, Value>,
    result: &mut ToolResult,
) -> Result<Value> {
    let ws = ctx.workspace;
    match name {
        "run_python" | "run_javascript" => {
            let language = if name == "run_python" {
                Language::Python
            } else {
                Language::Javascript
            };
            let code = string(args, "code")?;
            let run_args = match args.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
                Some(_) => {
                    return Err(Error::ToolCall("`args` must be an array of strings".into()))
                }
            };
            let req = RunRequest {
                language,
                source: Source::Code(code.to_string()),
                args: run_args,
                limits: ctx.limits.clone(),
            };
            let out = ctx.sandbox.run(ws, &req)?;
            result.ok = out.success();
            result.files = out.files.written().cloned().collect();
            result.detail = Some(format!(
                "{} · {} bytes of code",
                language.name(),
                code.len()
            ));
            let max = ctx.feedback_bytes;
            Ok(json!({
                "exit_code": out.exit_code,
                "stdout": cut(&out.stdout, max),
                "stderr": cut(&out.stderr, max),
                "error": out.error,
                "files_created": out.files.created.iter().map(|f| &f.path).collect::<Vec<_>>(),
                "files_modified": out.files.modified.iter().map(|f| &f.path).collect::<Vec<_>>(),
            }))
        }
        "read_file" => {
            let path = string(args, "path")?;
            result.detail = Some(path.to_string());
            let t = ws.read_text(path)?;
            let truncated = t.truncated || t.text.len() > ctx.feedback_bytes;
            Ok(
                json!({"path": path, "bytes": t.bytes, "content": cut(&t.text, ctx.feedback_bytes), "truncated": truncated}),
            )
        }
        "write_file" => {
            let path = string(args, "path")?;
            let content = string(args, "content")?;
            result.detail = Some(path.to_string());
            let before = ws.snapshot();
            let n = ws.write(path, content.as_bytes())?;
            result.files = before.changes(&ws.snapshot()).written().cloned().collect();
            Ok(json!({"path": path, "bytes_written": n}))
        }
        "edit_file" => {
            let path = string(args, "path")?;
            result.detail = Some(path.to_string());
            let n = ws.edit(
                path,
                string(args, "old_string")?,
                string(args, "new_string")?,
                flag(args, "replace_all"),
            )?;
            let bytes = ws.file_len(path).unwrap_or(0);
            result.files = vec![FileInfo {
                path: crate::workspace::paths::display(&ws.resolve(path)?),
                bytes,
            }];
            Ok(json!({"path": path, "replacements": n}))
        }
        "list_files" => {
            let path = opt_string(args, "path")?.unwrap_or(".");
            result.detail = Some(path.to_string());
            let entries = ws.list(path, flag(args, "recursive"), 1000)?;
            Ok(json!({"path": path, "entries": entries}))
        }
        "apply_patch" => {
            let patch = string(args, "patch")?;
            let before = ws.snapshot();
            let s = ws.apply_patch(patch)?;
            result.files = before.changes(&ws.snapshot()).written().cloned().collect();
            result.detail = s
                .created
                .iter()
                .chain(&s.modified)
                .chain(&s.deleted)
                .next()
                .cloned();
            Ok(serde_json::to_value(&s).expect("a summary serializes"))
        }
        "skills_list" => {
            let reg = ctx
                .skills
                .ok_or_else(|| Error::ToolCall("skills are not enabled on this server".into()))?;
            Ok(crate::skills::skills_list(reg, ctx.visible_skills))
        }
        "skills_read" => {
            let reg = ctx
                .skills
                .ok_or_else(|| Error::ToolCall("skills are not enabled on this server".into()))?;
            let skill = string(args, "name")?;
            if ctx
                .visible_skills
                .is_some_and(|v| !v.iter().any(|n| n == skill))
            {
                return Err(Error::NotFound(format!("skill {skill}")));
            }
            let path = opt_string(args, "path")?;
            result.skill = Some(skill.to_string());
            result.detail = path.map(str::to_string);
            crate::skills::skills_read(reg, skill, path)
        }
        other => Err(Error::ToolCall(format!(
            "there is no built-in tool named {other:?}"
        ))),
    }
}
