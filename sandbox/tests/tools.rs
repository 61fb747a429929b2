//! The built-in tools, the tool loop and artifacts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use weft_sandbox::tools::{self, ToolContext, ToolSet};
use weft_sandbox::{
    ArtifactStore, Error, LoopEnd, LoopEvent, Round, ToolCall, ToolLoop, Turn, Workspace,
};

fn content(r: &tools::ToolResult) -> Value {
    serde_json::from_str(&r.content).unwrap()
}

#[test]
fn definitions_are_function_tools_with_schemas() {
    let defs = tools::definitions(ToolSet::ALL);
    let names: Vec<&str> = defs.iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        [
            "run_python",
            "run_javascript",
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "apply_patch",
            "skills_list",
            "skills_read"
        ]
    );
    for d in &defs {
        let v = d.to_openai();
        assert_eq!(v["type"], "function");
        assert_eq!(v["function"]["parameters"]["type"], "object");
    }
    let code_only = tools::definitions(ToolSet {
        code: true,
        skills: false,
    });
    assert_eq!(code_only.len(), 7);
}

#[test]
fn file_tools_work_and_stay_inside() {
    let Some(sb) = common::sandbox("file_tools_work_and_stay_inside") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    let ctx = ToolContext::new(&sb, &ws);
    let call = |name: &str, args: Value| tools::execute(&ctx, name, &args).unwrap();

    let r = call(
        "write_file",
        json!({"path": "src/a.py", "content": "x = 1\ny = 2\n"}),
    );
    assert!(r.ok, "{r:?}");
    assert_eq!(r.files.len(), 1);
    assert_eq!(r.files[0].path, "src/a.py");
    let r = call("read_file", json!({"path": "/workspace/src/a.py"}));
    assert_eq!(content(&r)["content"], "x = 1\ny = 2\n");
    let r = call(
        "edit_file",
        json!({"path": "src/a.py", "old_string": "y = 2", "new_string": "y = 3"}),
    );
    assert!(r.ok, "{r:?}");
    let r = call(
        "edit_file",
        json!({"path": "src/a.py", "old_string": "nope", "new_string": ""}),
    );
    assert!(!r.ok);
    assert!(
        content(&r)["error"].as_str().unwrap().contains("not found"),
        "{r:?}"
    );
    let patch = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 10\n y = 3\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+new file\n";
    let r = call("apply_patch", json!({"patch": patch}));
    assert!(r.ok, "{r:?}");
    assert_eq!(ws.read("src/a.py").unwrap(), b"x = 10\ny = 3\n");
    assert_eq!(ws.read("notes.txt").unwrap(), b"new file\n");
    // A hunk that does not apply changes nothing.
    let bad = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-new file\n+changed\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-not there\n+x\n";
    let r = call("apply_patch", json!({"patch": bad}));
    assert!(!r.ok, "{r:?}");
    assert_eq!(ws.read("notes.txt").unwrap(), b"new file\n");
    let r = call("list_files", json!({"recursive": true}));
    let listing = content(&r);
    let paths: Vec<&str> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["notes.txt", "src", "src/a.py"]);
    // Arguments as a JSON string (OpenAI's form) work too.
    let r = call(
        "read_file",
        Value::String("{\"path\": \"notes.txt\"}".into()),
    );
    assert!(r.ok, "{r:?}");

    for (name, args) in [
        ("read_file", json!({"path": "../../etc/passwd"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("write_file", json!({"path": "../x", "content": "x"})),
        (
            "edit_file",
            json!({"path": "/etc/hosts", "old_string": "a", "new_string": "b"}),
        ),
        ("list_files", json!({"path": ".."})),
        (
            "apply_patch",
            json!({"patch": "--- /dev/null\n+++ b/../../evil\n@@ -0,0 +1 @@\n+x\n"}),
        ),
        ("read_file", json!({})),
        ("read_file", json!("not json")),
        ("no_such_tool", json!({})),
    ] {
        let r = call(name, args.clone());
        assert!(!r.ok, "{name} {args}: {r:?}");
        assert!(content(&r)["error"].is_string(), "{r:?}");
    }
    assert!(!ws.path().parent().unwrap().join("evil").exists());
}

#[test]
fn run_python_tool_reports_output_and_files() {
    let Some(sb) = common::sandbox("run_python_tool_reports_output_and_files") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    let ctx = ToolContext::new(&sb, &ws);
    let code = "a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nopen('fib.csv', 'w').write(f'n,fib\\n20,{a}\\n')\nprint(a)\n";
    let r = tools::execute(&ctx, "run_python", &json!({"code": code})).unwrap();
    assert!(r.ok, "{r:?}");
    let c = content(&r);
    assert_eq!(c["stdout"], "6765\n");
    assert_eq!(c["exit_code"], 0);
    assert_eq!(c["files_created"], json!(["fib.csv"]));
    assert_eq!(r.files[0].path, "fib.csv");
    let r = tools::execute(&ctx, "run_python", &json!({"code": "1/0"})).unwrap();
    assert!(!r.ok);
    assert!(content(&r)["stderr"]
        .as_str()
        .unwrap()
        .contains("ZeroDivisionError"));
    let r = tools::execute(
        &ctx,
        "run_javascript",
        &json!({"code": "console.log([1,2,3].map(x => x * 2).join(','))"}),
    )
    .unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(content(&r)["stdout"], "2,4,6\n");
}

#[derive(Clone, Debug, PartialEq)]
struct Msg(String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_loop_runs_calls_and_feeds_results_back() {
    let Some(sb) = common::sandbox("tool_loop_runs_calls_and_feeds_results_back") else {
        return;
    };
    let ws = Arc::new(Workspace::temporary().unwrap());
    let lp = ToolLoop::new(sb, ws.clone());
    let mut events = Vec::new();
    // A scripted "model": first it runs Python, then it reads the file it wrote, then answers
    // with what the tool results said.
    let outcome = lp
        .run(
            |rounds: &[Round<Msg>], last: bool| {
                assert!(!last);
                std::future::ready(Ok::<_, Error>(match rounds.len() {
                    0 => Turn::Calls {
                        message: Msg("computing".into()),
                        calls: vec![ToolCall {
                            id: "c1".into(),
                            name: "run_python".into(),
                            arguments: json!({"code": "import math\nopen('r.txt','w').write(str(math.comb(10, 3)))\nprint('saved')"}).to_string().into(),
                        }],
                    },
                    1 => Turn::Calls {
                        message: Msg("reading".into()),
                        calls: vec![ToolCall { id: "c2".into(), name: "read_file".into(), arguments: json!({"path": "r.txt"}) }],
                    },
                    _ => {
                        let read: Value = serde_json::from_str(&rounds[1].results[0].content).unwrap();
                        Turn::Final(Msg(format!("the answer is {}", read["content"].as_str().unwrap())))
                    }
                }))
            },
            |e| match e {
                LoopEvent::Running { round, call } => events.push(format!("running {round} {}", call.name)),
                LoopEvent::Finished { round, call, result, .. } => {
                    events.push(format!("finished {round} {} {}", call.name, result.ok))
                }
            },
        )
        .await
        .unwrap();
    let LoopEnd::Final(Msg(answer)) = outcome.end else {
        panic!("{:?}", outcome.end)
    };
    assert_eq!(answer, "the answer is 120");
    assert_eq!(outcome.rounds.len(), 2);
    assert_eq!(outcome.rounds[0].results[0].files[0].path, "r.txt");
    assert_eq!(
        events,
        [
            "running 1 run_python",
            "finished 1 run_python true",
            "running 2 read_file",
            "finished 2 read_file true"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_loop_stops_at_the_round_limit_and_returns_client_calls() {
    let Some(sb) = common::sandbox("tool_loop_stops_at_the_round_limit_and_returns_client_calls")
    else {
        return;
    };
    let ws = Arc::new(Workspace::temporary().unwrap());
    let mut lp = ToolLoop::new(sb, ws);
    lp.max_rounds = 2;
    let mut lasts = Vec::new();
    let outcome = lp
        .run(
            |_rounds: &[Round<Msg>], last: bool| {
                lasts.push(last);
                std::future::ready(Ok::<_, Error>(Turn::Calls {
                    message: Msg("again".into()),
                    calls: vec![ToolCall {
                        id: "x".into(),
                        name: "list_files".into(),
                        arguments: json!({}),
                    }],
                }))
            },
            |_| {},
        )
        .await
        .unwrap();
    assert!(matches!(outcome.end, LoopEnd::RoundLimit));
    assert_eq!(outcome.rounds.len(), 2);
    assert_eq!(lasts, [false, false, true]);

    let outcome = lp
        .run(
            |_rounds: &[Round<Msg>], _last: bool| {
                std::future::ready(Ok::<_, Error>(Turn::Calls {
                    message: Msg("mixed".into()),
                    calls: vec![
                        ToolCall {
                            id: "a".into(),
                            name: "write_file".into(),
                            arguments: json!({"path": "a.txt", "content": "a"}),
                        },
                        ToolCall {
                            id: "b".into(),
                            name: "get_weather".into(),
                            arguments: json!({"city": "Paris"}),
                        },
                    ],
                }))
            },
            |_| {},
        )
        .await
        .unwrap();
    let LoopEnd::ClientCalls { calls, .. } = outcome.end else {
        panic!()
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(outcome.rounds[0].calls[0].name, "write_file");
}

#[test]
fn artifacts_are_saved_served_and_expire() {
    let ws = Workspace::temporary().unwrap();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    ws.write("out/report.csv", b"a,b\n1,2\n").unwrap();
    ws.write("plot.png", png).unwrap();
    ws.write("page.html", b"<html><script>alert(1)</script></html>")
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let store = ArtifactStore::new(root.path(), Duration::from_secs(3600)).unwrap();
    let files = ws.snapshot().files();
    let run = store.save(&ws, &files).unwrap();
    assert_eq!(run.run_id.len(), 32);
    let names: Vec<&str> = run.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["out/report.csv", "page.html", "plot.png"]);
    assert_eq!(
        run.files[0].url,
        format!("/api/code/artifacts/{}/out/report.csv", run.run_id)
    );
    let a = store.open(&run.run_id, "out/report.csv").unwrap();
    assert_eq!(a.bytes, b"a,b\n1,2\n");
    assert_eq!(a.content_type, "text/csv; charset=utf-8");
    assert_eq!(a.file_name, "report.csv");
    assert_eq!(
        store.open(&run.run_id, "plot.png").unwrap().content_type,
        "image/png"
    );
    assert_eq!(
        store.open(&run.run_id, "page.html").unwrap().content_type,
        "text/plain; charset=utf-8"
    );
    assert!(matches!(
        store.open(&run.run_id, "../x"),
        Err(Error::Path { .. })
    ));
    assert!(matches!(
        store.open(&run.run_id, "/etc/passwd"),
        Err(Error::Path { .. })
    ));
    assert!(store
        .open("../../etc", "passwd")
        .unwrap_err()
        .is_not_found());
    assert!(store
        .open(&run.run_id, "missing.txt")
        .unwrap_err()
        .is_not_found());
    assert!(store.open(&"0".repeat(32), "x").unwrap_err().is_not_found());
    // Expiry: a store with a zero TTL sees every run as expired.
    let expired = ArtifactStore::new(root.path(), Duration::ZERO).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(expired
        .open(&run.run_id, "plot.png")
        .unwrap_err()
        .is_not_found());
    assert!(!root.path().join(&run.run_id).exists());
}

/// A request that names its skills with discovery off: `skills_list` and `skills_read` see only
/// those, the others are as if absent.
#[test]
fn skill_tools_show_only_the_visible_skills() {
    let Some(sb) = common::sandbox("skill_tools_show_only_the_visible_skills") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for name in ["alpha", "beta"] {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        std::fs::write(
            dir.path().join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\nDo {name}.\n"),
        )
        .unwrap();
    }
    let reg = weft_sandbox::SkillRegistry::new(None, vec![dir.path().to_path_buf()]);
    let ws = Workspace::temporary().unwrap();
    let mut ctx = ToolContext::new(&sb, &ws);
    ctx.skills = Some(&reg);
    let listed = |ctx: &ToolContext| -> Vec<String> {
        let r = tools::execute(ctx, "skills_list", &json!({})).unwrap();
        content(&r)["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(&ctx), vec!["alpha", "beta"]);
    let visible = vec!["alpha".to_string()];
    ctx.visible_skills = Some(&visible);
    assert_eq!(listed(&ctx), vec!["alpha"]);
    let read = tools::execute(&ctx, "skills_read", &json!({"name": "alpha"})).unwrap();
    assert!(content(&read)["instructions"]
        .as_str()
        .unwrap()
        .contains("Do alpha"));
    let hidden = tools::execute(&ctx, "skills_read", &json!({"name": "beta"}));
    match hidden {
        Err(e) => assert!(e.to_string().contains("beta"), "{e}"),
        Ok(r) => assert!(!r.ok && r.content.contains("beta"), "{}", r.content),
    }
}
