//! The built-in tools' names, descriptions and JSON-schema parameters, as offered to a model.

use serde_json::{json, Value};

/// One tool a model can call.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ToolSpec {
    /// The function name.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// JSON schema of its arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// The OpenAI / Ollama function-tool object: `{"type":"function","function":{...}}`.
    pub fn to_openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// Which groups of tools to offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolSet {
    /// `run_python`, `run_javascript` and the file tools (`--code-exec`).
    pub code: bool,
    /// `skills_list` and `skills_read`.
    pub skills: bool,
}

impl ToolSet {
    /// Code and skill tools.
    pub const ALL: ToolSet = ToolSet {
        code: true,
        skills: true,
    };
}

/// Names of the code and file tools.
pub const CODE_TOOLS: [&str; 7] = [
    "run_python",
    "run_javascript",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "apply_patch",
];

/// Names of the skill tools.
pub const SKILL_TOOLS: [&str; 2] = ["skills_list", "skills_read"];

/// True when `name` is one of the built-in tools in `set`.
pub fn is_builtin(set: ToolSet, name: &str) -> bool {
    (set.code && CODE_TOOLS.contains(&name)) || (set.skills && SKILL_TOOLS.contains(&name))
}

fn run_params(lang: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": format!("The {lang} program to run.")},
            "args": {"type": "array", "items": {"type": "string"}, "description": "Command-line arguments (optional)."}
        },
        "required": ["code"],
        "additionalProperties": false
    })
}

fn path_param() -> Value {
    json!({"type": "string", "description": "Path relative to the workspace (or under /workspace)."})
}

/// The tools in `set`, in a stable order.
pub fn definitions(set: ToolSet) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    if set.code {
        out.push(ToolSpec {
            name: "run_python",
            description: "Run a Python 3.12 program in a sandbox and return its stdout, stderr, exit code and the files it created. The standard library is available (no third-party packages, no network, no subprocesses). The working directory is /workspace, where files persist between calls in this conversation; print what you need to see.",
            parameters: run_params("Python"),
        });
        out.push(ToolSpec {
            name: "run_javascript",
            description: "Run a JavaScript program in a QuickJS sandbox (ES2023; `std` and `os` are globals, e.g. std.open, std.loadFile; no Node.js APIs, no network). Use console.log or print for output. The working directory is /workspace.",
            parameters: run_params("JavaScript"),
        });
        out.push(ToolSpec {
            name: "read_file",
            description: "Read a text file from the workspace.",
            parameters: json!({
                "type": "object",
                "properties": {"path": path_param()},
                "required": ["path"],
                "additionalProperties": false
            }),
        });
        out.push(ToolSpec {
            name: "write_file",
            description: "Create or overwrite a file in the workspace (parent folders are created).",
            parameters: json!({
                "type": "object",
                "properties": {"path": path_param(), "content": {"type": "string", "description": "The whole new content."}},
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        });
        out.push(ToolSpec {
            name: "edit_file",
            description: "Replace an exact piece of text in a workspace file. old_string must occur exactly once unless replace_all is true.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path_param(),
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The replacement."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        });
        out.push(ToolSpec {
            name: "list_files",
            description: "List files and folders in the workspace.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Folder to list (default: the workspace root)."},
                    "recursive": {"type": "boolean", "description": "Include subfolders (default false)."}
                },
                "additionalProperties": false
            }),
        });
        out.push(ToolSpec {
            name: "apply_patch",
            description: "Apply a unified diff (as made by `diff -u` or `git diff`; several files allowed; /dev/null creates or deletes) to the workspace. Nothing changes unless every hunk applies.",
            parameters: json!({
                "type": "object",
                "properties": {"patch": {"type": "string", "description": "The unified diff."}},
                "required": ["patch"],
                "additionalProperties": false
            }),
        });
    }
    if set.skills {
        out.push(ToolSpec {
            name: "skills_list",
            description: "List the available skills (name, description, files).",
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        });
        out.push(ToolSpec {
            name: "skills_read",
            description:
                "Read a skill's instructions (SKILL.md), or one of its files when path is given.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill's name."},
                    "path": {"type": "string", "description": "A file inside the skill (optional)."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        });
    }
    out
}
