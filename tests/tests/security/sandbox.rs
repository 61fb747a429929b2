//! The sandbox holds its quota (issue 33, item 6 and failure 1): the sandbox growth table.
//!
//! Each attack grows the workspace without (many) writes: a truncate to 100 GiB, a seek to
//! 50 GiB then one byte, 5000 symlinks, 5000 hard links, 5000 empty directories, 5000 empty
//! files. Each is tried
//!
//! - through `weft exec` (the CLI): refused with the quota message, the folder stays small;
//! - through the server's tool loop, with a user key on `weft serve --code-exec` (Qwen2.5-Coder
//!   0.5B is shown one worked call and asked what the attack prints): the executed call reports
//!   the quota message, the server still answers `/health`, and its resident memory did not
//!   jump (the review's truncate made it allocate 100 GiB and abort). The model does not copy
//!   every program into a call; rows it skips are reported loudly, and the truncate row (the
//!   review's crash) is required.
//!
//! And the bound on runs at once: with `--sandbox-runs 1`, a run held busy by a long loop
//! (ended by the sandbox's own time limit) makes the next code request, on the OpenAI and the
//! Ollama surface, a 429 with `Retry-After`.
//!
//! SQLite only: nothing here touches the database beyond the key. Needs the sandbox runtimes
//! and the Qwen model; skips loudly when one is missing, fails under CI.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use weft_core::test_support::model_path;
use weft_sandbox::runtimes;
use weft_tests::{send, weft_binary, Client, Server};

use crate::harness::{call, Backend, Db};

/// One way to grow a workspace, as a Python program (the model's call must carry it whole,
/// whitespace aside, to count as that attack).
struct Attack {
    name: &'static str,
    code: &'static str,
}

const ATTACKS: [Attack; 6] = [
    Attack {
        name: "truncate to 100 GiB",
        code: "open('s.bin', 'wb').truncate(100 << 30)",
    },
    Attack {
        name: "seek 50 GiB then write one byte",
        code: "f = open('h.bin', 'wb')\nf.seek(50 << 30)\nf.write(b'x')\nf.close()",
    },
    Attack {
        name: "5000 symlinks",
        code: "import os\nfor i in range(5000):\n    os.symlink('t', 'l%d' % i)",
    },
    Attack {
        name: "5000 hard links",
        code:
            "import os\nopen('t', 'w').close()\nfor i in range(5000):\n    os.link('t', 'h%d' % i)",
    },
    Attack {
        name: "5000 empty directories",
        code: "import os\nfor i in range(5000):\n    os.mkdir('d%d' % i)",
    },
    Attack {
        name: "5000 empty files",
        code: "for i in range(5000):\n    open('f%d' % i, 'w').close()",
    },
];

/// What the quota refusal says (`weft_sandbox`'s run error).
const QUOTA: &str = "workspace quota reached";
/// The default limits of a run (`weft_sandbox::Limits::default()`).
const FILE_BYTES: u64 = 64 << 20;
const ENTRIES: usize = 1000;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-sec-sandbox-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Logical bytes and entries under `dir` (symlinks not followed; a sparse file counts at its
/// length).
fn usage(dir: &Path) -> (u64, usize) {
    let (mut bytes, mut entries) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        entries += 1;
        let meta = std::fs::symlink_metadata(e.path()).unwrap();
        if meta.is_dir() {
            let (b, n) = usage(&e.path());
            bytes += b;
            entries += n;
        } else if meta.is_file() {
            bytes += meta.len();
        }
    }
    (bytes, entries)
}

#[test]
fn growth_table_through_weft_exec() {
    if !weft_sandbox::test_support::runtimes_present("growth_table_through_weft_exec") {
        return;
    }
    let bin = weft_binary();
    for (k, a) in ATTACKS.iter().enumerate() {
        let dir = scratch(&format!("exec-{k}"));
        std::fs::write(dir.join("attack.py"), a.code).unwrap();
        let out = Command::new(&bin)
            .current_dir(&dir)
            .env("WEFT_SANDBOX_DIR", runtimes::default_dir())
            .args(["exec", "attack.py"])
            .output()
            .expect("running weft exec");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: {stderr}", a.name);
        assert!(stderr.contains(QUOTA), "{}: {stderr}", a.name);
        let (bytes, entries) = usage(&dir);
        assert!(bytes <= FILE_BYTES + 4096, "{}: {bytes} bytes", a.name);
        // The script itself plus what the quota let through.
        assert!(entries <= ENTRIES + 1, "{}: {entries} entries", a.name);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A system prompt and one worked exchange (as in server_code_exec.rs: the 0.5B model follows
/// an example far more reliably than instructions), then `question`.
fn conversation(question: &str) -> Value {
    let result = r#"{"exit_code": 0, "stdout": "385\n", "stderr": "", "error": null, "files_created": [], "files_modified": []}"#;
    let arguments =
        r#"{"code": "total = 0\nfor n in range(1, 11):\n    total += n * n\nprint(total)"}"#;
    json!([
        {"role": "system", "content": "You are a helpful assistant. Compute with the run_python tool: write a complete program that prints the result, then answer with the printed value."},
        {"role": "user", "content": "Use Python to compute the sum of the squares of 1 to 10."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_ex1", "type": "function",
            "function": {"name": "run_python", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_ex1", "content": result},
        {"role": "assistant", "content": "The sum of the squares of 1 to 10 is 385."},
        {"role": "user", "content": question},
    ])
}

/// The conversation asking the model to run `code`.
fn run_this(code: &str) -> Value {
    conversation(&format!(
        "Use Python to compute what this program prints:\n```python\n{code}\n```"
    ))
}

const MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

/// `weft serve --code-exec` with Qwen on the database of `db`, plus `extra`.
fn code_server(db: &Db, model: &Path, extra: &[&str]) -> Server {
    let mut args: Vec<String> = ["--model", &model.display().to_string(), "--ctx", "4096"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push("--code-exec".into());
    args.extend(db.db_args());
    args.extend(extra.iter().map(|s| s.to_string()));
    let sandbox_dir = runtimes::default_dir();
    Server::start_env(
        &args,
        &[("WEFT_HOME", &db.home), ("WEFT_SANDBOX_DIR", &sandbox_dir)],
    )
}

/// The server's resident memory in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// Asks the model to run `code`; returns the executed `run_python` calls.
fn ask_to_run(c: &Client, key: &str, code: &str) -> Vec<Value> {
    let body = json!({"model": MODEL, "messages": run_this(code), "temperature": 0,
                      "max_tokens": 200});
    let r = call(
        c,
        key,
        "POST",
        "/v1/chat/completions",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    j["choices"][0]["message"]["executed_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["name"] == "run_python")
        .collect()
}

#[test]
fn growth_table_through_the_server_tool_loop() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    if !weft_sandbox::test_support::runtimes_present("growth_table_through_the_server_tool_loop") {
        return;
    }
    let Some(db) = Db::new(Backend::Sqlite, "sandbox-growth") else {
        return;
    };
    let key = db.cli_key("user");
    let s = code_server(&db, &model, &[]);
    let c = s.client();

    // Warm up: a harmless run loads the runtime and the model's buffers, so what follows
    // measures only the attacks.
    let calls = ask_to_run(&c, &key, "print(sum(range(10)))");
    assert!(!calls.is_empty(), "the model made no run_python call");
    let before = rss_kib(s.pid());

    let mut exercised = Vec::new();
    for a in &ATTACKS {
        let calls = ask_to_run(&c, &key, a.code);
        let made = calls
            .iter()
            .find(|c| same_program(c["arguments"]["code"].as_str().unwrap_or(""), a.code));
        match made {
            Some(made) => {
                assert_eq!(made["ok"], false, "{}: {made}", a.name);
                let output = made["output"].as_str().unwrap_or("");
                assert!(output.contains(QUOTA), "{}: {output}", a.name);
                exercised.push(a.name);
            }
            // The 0.5B model does not copy every program into a call (it sometimes answers
            // without one); such a row is reported, and weft exec's table above covers it.
            None => eprintln!(
                "\n*** {}: the model made no faithful run_python call ({calls:?}); row not exercised through the server ***\n",
                a.name
            ),
        }

        let h = call(&c, &key, "GET", "/health", None);
        assert_eq!(
            h.status, 200,
            "{}: /health after the attack: {}",
            a.name, h.body
        );
        let now = rss_kib(s.pid());
        assert!(
            now < before + (256 << 10),
            "{}: the server's RSS grew from {before} KiB to {now} KiB",
            a.name
        );
    }
    // The review's crash (a truncate to 100 GiB, then the host reading the file) must have
    // gone through the server's loop.
    assert!(
        exercised.contains(&ATTACKS[0].name),
        "the truncate attack was not exercised: {exercised:?}"
    );
    eprintln!("growth table through the server: exercised {exercised:?}");
}

/// Whether the model's program is `code` (whitespace aside): a rewritten program is another
/// program, and what it does is not the attack.
fn same_program(made: &str, code: &str) -> bool {
    let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    squash(made) == squash(code)
}

/// Reads a streamed response until `needle` appears (or the stream ends); returns what was
/// read.
fn read_until(stream: &mut std::net::TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&seen).contains(needle) {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn runs_beyond_the_bound_get_429_with_retry_after() {
    let Some(model) = model_path("qwen2") else {
        return;
    };
    if !weft_sandbox::test_support::runtimes_present("runs_beyond_the_bound_get_429") {
        return;
    }
    let Some(db) = Db::new(Backend::Sqlite, "sandbox-runs") else {
        return;
    };
    let key = db.cli_key("user");
    let s = code_server(&db, &model, &["--sandbox-runs", "1"]);
    let c = s.client();
    let auth = format!("Bearer {key}");

    // Run 1 (of the 1 allowed): a sum over 10^10 terms, which the model computes with a loop
    // that only the sandbox's own time limit ends, in the chat UI's stream, whose `running`
    // frame says the run holds its slot.
    let busy = json!({"maxTokens": 200, "temperature": 0,
                      "messages": conversation("Use Python to compute the sum of the squares of 1 to 10000000000.")});
    let mut held = c.connect().unwrap();
    send(
        &mut held,
        "POST",
        "/api/chat",
        Some(body_bytes(&busy).as_slice()),
        &[("Authorization", &auth)],
    )
    .unwrap();
    let head = read_until(&mut held, "\"tool_progress\":\"running\"");
    assert!(
        head.contains("\"tool_progress\":\"running\""),
        "the model did not start the run: {head}"
    );

    // Run 2, while run 1 holds the only slot: turned away before anything is generated.
    let msgs = json!([{"role": "user", "content": "Use Python to add 2 and 2."}]);
    let body = json!({"model": MODEL, "messages": msgs, "max_tokens": 20});
    let r = call(
        &c,
        &key,
        "POST",
        "/v1/chat/completions",
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    let retry: u64 = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", r.headers))
        .parse()
        .unwrap();
    assert!(retry >= 1);
    assert!(r.body.contains("sandbox is busy"), "{}", r.body);
    // The other surfaces share the bound.
    let ollama = json!({"model": MODEL, "messages": msgs, "stream": false});
    let r = call(&c, &key, "POST", "/api/chat", Some(&ollama.to_string()));
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);

    // Run 1's client goes away; its guest stops at the sandbox's time limit. The server
    // answers meanwhile.
    drop(held);
    let h = call(&c, &key, "GET", "/health", None);
    assert_eq!(h.status, 200, "{}", h.body);
}

fn body_bytes(v: &Value) -> Vec<u8> {
    v.to_string().into_bytes()
}
