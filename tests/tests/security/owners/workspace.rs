//! Sandbox workspaces and artifacts have owners: key A's `run_python` writes `secret.txt` in
//! A's default chat-UI session; key B's same call, in B's default session, finds no such file
//! (the review's attack: both shared one `__default__` workspace), and B cannot download A's
//! artifact or continue A's session. A copies its file in a later turn with the same call, so
//! the check can fail. Needs `--code-exec`, the sandbox runtimes and Qwen2.5-Coder 0.5B (skips loudly when
//! one is missing, fails under CI).

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_sandbox::runtimes;
use weft_tests::{Client, Response, Server};

use super::{error_of, same_as_missing};
use crate::harness::{call, Db};
use crate::on_both;

const SECRET: &str = "tiger-4242";

/// A system prompt and one worked exchange (a call, its result, the answer), then `question`:
/// the 0.5B model follows an example far more reliably than instructions.
fn conversation(example: &str, code: &str, stdout: &str, answer: &str, question: &str) -> Value {
    let result = json!({"exit_code": 0, "stdout": stdout, "stderr": "", "error": null,
        "files_created": [], "files_modified": []})
    .to_string();
    let arguments = json!({ "code": code }).to_string();
    json!([
        {"role": "system", "content": "You are a helpful assistant. Work with files using the run_python tool: write a complete program, then answer with what it printed."},
        {"role": "user", "content": example},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_ex1", "type": "function",
            "function": {"name": "run_python", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_ex1", "content": result},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": question},
    ])
}

fn write_secret() -> Value {
    conversation(
        "Use Python to write the text alpha-17 to the file note.txt.",
        "with open('note.txt', 'w') as f:\n    f.write('alpha-17')\nprint('written')",
        "written\n",
        "I wrote alpha-17 to note.txt.",
        &format!("Use Python to write the text {SECRET} to the file secret.txt."),
    )
}

/// Reading, as a copy: the model follows the writing pattern far more reliably than a request
/// to print (which it may answer without calling), and the copy is an artifact to check.
fn copy_secret() -> Value {
    conversation(
        "Use Python to copy the file note.txt to the file backup.txt.",
        "data = open('note.txt').read()\nwith open('backup.txt', 'w') as f:\n    f.write(data)\nprint('copied')",
        "copied\n",
        "I copied note.txt to backup.txt.",
        "Use Python to copy the file secret.txt to the file copy.txt.",
    )
}

/// One chat-UI turn of `key` in its default session (a fresh history, the same workspace).
fn turn(c: &Client, key: &str, sid: Option<&str>, messages: Value) -> Response {
    let mut body = json!({"maxTokens": 120, "temperature": 0, "newChat": true,
        "messages": messages});
    if let Some(s) = sid {
        body["sessionId"] = json!(s);
    }
    call(c, key, "POST", "/api/ui/chat", Some(&body.to_string()))
}

fn frames(r: &Response) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    r.sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

/// The first `run_python` step of a turn (the test needs the model to have called it).
fn step(frames: &[Value]) -> Value {
    frames
        .iter()
        .find(|f| f["skill_step"] == "run_python")
        .unwrap_or_else(|| panic!("the model did not call run_python: {frames:?}"))
        .clone()
}

/// The artifact URL of file `name` among a step's files.
fn file_url(step: &Value, name: &str) -> String {
    step["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no {name} among the files: {step}"))["url"]
        .as_str()
        .unwrap()
        .to_string()
}

fn serve(db: &Db) -> Option<Server> {
    let model = model_path("qwen2")?;
    if !weft_sandbox::test_support::runtimes_present("owners_workspace") {
        return None;
    }
    let mut args: Vec<String> = [
        "--model",
        &format!("qwen={}", model.display()),
        "--ctx",
        "4096",
        "--parallel",
        "1",
        "--code-exec",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(db.db_args());
    let sandbox = runtimes::default_dir();
    Some(Server::start_env(
        &args,
        &[
            ("WEFT_HOME", db.home.as_path()),
            ("WEFT_SANDBOX_DIR", &sandbox),
        ],
    ))
}

fn workspaces_and_artifacts_belong_to_their_owner(db: &Db) {
    let Some(s) = serve(db) else {
        return;
    };
    let c = s.client();
    let (a, b) = (db.cli_key("user"), db.cli_key("user"));

    // A writes secret.txt in its default session; the file is A's artifact.
    let fa = frames(&turn(&c, &a, None, write_secret()));
    let st = step(&fa);
    assert_eq!(st["ok"], true, "{st}");
    let url = file_url(&st, "secret.txt");
    let own = call(&c, &a, "GET", &url, None);
    assert_eq!(own.status, 200, "A downloads its artifact: {}", own.body);
    assert!(own.body.contains(SECRET), "{}", own.body);
    let sa = fa.last().unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    // B's artifact download: the 404 of a run that does not exist.
    let run = url.split('/').nth(4).unwrap().to_string();
    let none = "0123456789abcdef0123456789abcdef";
    let missing = call(&c, &b, "GET", &url.replace(&run, none), None);
    let r = call(&c, &b, "GET", &url, None);
    same_as_missing(&r, &missing, none, &run, "B downloads A's artifact");
    assert!(!r.body.contains(SECRET));

    // B copies secret.txt in its own default session: the call runs, and finds no such file.
    let fb = frames(&turn(&c, &b, None, copy_secret()));
    let st = step(&fb);
    assert_eq!(
        st["ok"], false,
        "B's run_python read a file it never wrote: {st}"
    );
    let all: String = fb.iter().map(Value::to_string).collect();
    assert!(!all.contains(SECRET), "B saw A's secret: {all}");
    assert_ne!(fb.last().unwrap()["sessionId"], sa.as_str());

    // Nor can B name A's session to reach A's workspace.
    let missing = turn(&c, &b, Some(none), copy_secret());
    let r = turn(&c, &b, Some(&sa), copy_secret());
    same_as_missing(&r, &missing, none, &sa, "B runs code in A's session");
    assert!(!error_of(&r).contains(SECRET));

    // A's own later turn copies the file: the same call works where the file is.
    let fa = frames(&turn(&c, &a, None, copy_secret()));
    let st = step(&fa);
    assert_eq!(st["ok"], true, "A copies its own file: {st}");
    let copy = call(&c, &a, "GET", &file_url(&st, "copy.txt"), None);
    assert_eq!(copy.status, 200, "{}", copy.body);
    assert!(copy.body.contains(SECRET), "A's copy: {}", copy.body);
    assert_eq!(s.request("GET", "/health", None).status, 200);
}

on_both!(
    workspaces_and_artifacts_belong_to_their_owner,
    workspaces_and_artifacts_belong_to_their_owner_sqlite,
    workspaces_and_artifacts_belong_to_their_owner_postgres
);
