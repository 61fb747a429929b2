//! The workspace quota charges every way a run can grow its workspace: each test is one growth
//! path, tried past the small limits of `common::small_limits` (1 MiB, 50 entries), and asserts
//! the call was refused (`ENOSPC`, `file_limit_hit`, the quota message) and the workspace did
//! not grow past the limit.

mod common;

use weft_sandbox::{Language, RunOutcome, Workspace};

const BYTES: u64 = 1 << 20;
const ENTRIES: usize = 50;

fn refused(out: &RunOutcome) {
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.file_limit_hit, "{out:?}");
    assert!(
        out.stderr.contains("No space left on device"),
        "{}",
        out.stderr
    );
    let e = out.error.as_deref().unwrap_or_default();
    assert!(e.contains("workspace quota reached"), "{e}");
}

/// Logical length of every regular file, added up (a sparse file counts at its length).
fn logical_bytes(ws: &Workspace) -> u64 {
    ws.snapshot().files().iter().map(|f| f.bytes).sum()
}

/// Every entry in the workspace, links and directories included.
fn entries(ws: &Workspace) -> usize {
    ws.list(".", true, 100_000).unwrap().len()
}

#[test]
fn truncate_to_100_gib_is_refused() {
    let Some(sb) = common::sandbox("truncate_to_100_gib_is_refused") else {
        return;
    };
    let (out, ws) = common::py(&sb, "open('s.bin', 'wb').truncate(100 << 30)\n");
    refused(&out);
    assert_eq!(ws.file_len("s.bin").unwrap(), 0);
}

#[test]
fn growing_by_truncate_is_charged_until_the_limit() {
    let Some(sb) = common::sandbox("growing_by_truncate_is_charged_until_the_limit") else {
        return;
    };
    // 600 KiB fits; another 600 KiB in a second file does not (1 MiB in all).
    let code = "import os\nwith open('a.bin', 'wb') as f:\n    f.truncate(600 << 10)\nprint('first ok', os.path.getsize('a.bin'))\nwith open('b.bin', 'wb') as f:\n    f.truncate(600 << 10)\n";
    let (out, ws) = common::py(&sb, code);
    assert!(out.stdout.contains("first ok 614400"), "{out:?}");
    refused(&out);
    assert!(logical_bytes(&ws) <= BYTES, "{}", logical_bytes(&ws));
}

#[test]
fn shrinking_is_free() {
    let Some(sb) = common::sandbox("shrinking_is_free") else {
        return;
    };
    let code = "with open('a.bin', 'wb') as f:\n    f.write(b'x' * 1000)\n    f.truncate(10)\n    f.truncate(0)\nprint('ok')\n";
    let (out, _ws) = common::py(&sb, code);
    assert!(out.success(), "{out:?}");
    assert!(!out.file_limit_hit);
}

#[test]
fn seek_50_gib_then_one_byte_is_refused() {
    let Some(sb) = common::sandbox("seek_50_gib_then_one_byte_is_refused") else {
        return;
    };
    let code = "f = open('h.bin', 'wb')\nf.seek(50 << 30)\nf.write(b'x')\nf.close()\n";
    let (out, ws) = common::py(&sb, code);
    refused(&out);
    assert!(ws.file_len("h.bin").unwrap() <= BYTES);
}

#[test]
fn a_small_gap_is_charged_at_its_length() {
    let Some(sb) = common::sandbox("a_small_gap_is_charged_at_its_length") else {
        return;
    };
    // A 700 KiB hole fits; a second one does not: holes count like written bytes.
    let code = "import os\nfor name in ('a.bin', 'b.bin'):\n    with open(name, 'wb') as f:\n        f.seek(700 << 10)\n        f.write(b'x')\n    print(name, os.path.getsize(name))\n";
    let (out, ws) = common::py(&sb, code);
    assert!(out.stdout.contains("a.bin 716801"), "{out:?}");
    refused(&out);
    assert!(logical_bytes(&ws) <= BYTES, "{}", logical_bytes(&ws));
}

#[test]
fn pwrite_at_a_far_offset_is_refused() {
    let Some(sb) = common::sandbox("pwrite_at_a_far_offset_is_refused") else {
        return;
    };
    let code = "import os\nfd = os.open('p.bin', os.O_WRONLY | os.O_CREAT)\nos.pwrite(fd, b'x', 50 << 30)\n";
    let (out, ws) = common::py(&sb, code);
    refused(&out);
    assert_eq!(ws.file_len("p.bin").unwrap(), 0);
}

#[test]
fn appending_after_a_seek_leaves_no_hole() {
    let Some(sb) = common::sandbox("appending_after_a_seek_leaves_no_hole") else {
        return;
    };
    // In append mode every write goes to the end: nothing to charge but the bytes.
    let code = "with open('a.log', 'ab') as f:\n    f.seek(50 << 30)\n    f.write(b'line\\n')\nprint(open('a.log', 'rb').read())\n";
    let (out, ws) = common::py(&sb, code);
    assert!(out.success(), "{out:?}");
    assert_eq!(ws.read("a.log").unwrap(), b"line\n");
}

#[test]
fn javascript_seek_then_write_is_refused() {
    let Some(sb) = common::sandbox("javascript_seek_then_write_is_refused") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    // QuickJS's stdio seeks with a 32-bit `long` on wasm32: 100 MiB, past the 1 MiB budget.
    let code = "const f = std.open('h.bin', 'w');\nf.seek(100 * 1024 * 1024, std.SEEK_SET);\nf.puts('x');\nf.flush();\nconst e = f.error();\nf.close();\nif (e) { std.err.puts('write failed\\n'); std.exit(1); }\n";
    let out = common::run_in(&sb, &ws, Language::Javascript, code, common::small_limits());
    assert!(out.file_limit_hit, "{out:?}");
    assert!(ws.file_len("h.bin").unwrap() <= BYTES);
}

#[test]
fn five_thousand_symlinks_stop_at_the_entry_limit() {
    let Some(sb) = common::sandbox("five_thousand_symlinks_stop_at_the_entry_limit") else {
        return;
    };
    let code = "import os\nfor i in range(5000):\n    os.symlink('target', f'l{i}')\n";
    let (out, ws) = common::py(&sb, code);
    refused(&out);
    assert!(entries(&ws) <= ENTRIES, "{}", entries(&ws));
}

#[test]
fn hard_links_stop_at_the_entry_limit() {
    let Some(sb) = common::sandbox("hard_links_stop_at_the_entry_limit") else {
        return;
    };
    let code =
        "import os\nopen('t', 'w').close()\nfor i in range(5000):\n    os.link('t', f'h{i}')\n";
    let (out, ws) = common::py(&sb, code);
    refused(&out);
    assert!(entries(&ws) <= ENTRIES, "{}", entries(&ws));
}

#[test]
fn empty_directories_stop_at_the_entry_limit() {
    let Some(sb) = common::sandbox("empty_directories_stop_at_the_entry_limit") else {
        return;
    };
    let code = "import os\nfor i in range(5000):\n    os.mkdir(f'd{i}')\n";
    let (out, ws) = common::py(&sb, code);
    refused(&out);
    assert!(entries(&ws) <= ENTRIES, "{}", entries(&ws));
}

#[test]
fn empty_files_stop_at_the_entry_limit() {
    let Some(sb) = common::sandbox("empty_files_stop_at_the_entry_limit") else {
        return;
    };
    let code = "for i in range(5000):\n    open(f'f{i}', 'w').close()\n";
    let (out, ws) = common::py(&sb, code);
    refused(&out);
    assert!(entries(&ws) <= ENTRIES, "{}", entries(&ws));
}

#[test]
fn the_read_file_tool_reads_a_huge_sparse_file_by_its_limit() {
    let Some(sb) = common::sandbox("the_read_file_tool_reads_a_huge_sparse_file_by_its_limit")
    else {
        return;
    };
    // A file the host made sparse (as an earlier quota-less run could have): the tool reads
    // at most its text limit, never the file's length.
    let ws = Workspace::temporary().unwrap();
    std::fs::File::create(ws.path().join("s.bin"))
        .unwrap()
        .set_len(100 << 30)
        .unwrap();
    let ctx = weft_sandbox::tools::ToolContext::new(&sb, &ws);
    let r = weft_sandbox::tools::execute(&ctx, "read_file", &serde_json::json!({"path": "s.bin"}))
        .unwrap();
    assert!(r.ok, "{}", r.content);
    let v: serde_json::Value = serde_json::from_str(&r.content).unwrap();
    assert_eq!(v["truncated"], true);
    assert_eq!(v["bytes"], 100u64 << 30);
    let r = weft_sandbox::tools::execute(
        &ctx,
        "edit_file",
        &serde_json::json!({"path": "s.bin", "old_string": "a", "new_string": "b"}),
    )
    .unwrap();
    assert!(!r.ok);
    assert!(r.content.contains("larger than"), "{}", r.content);
}

#[test]
fn a_kept_workspace_holds_its_quota_across_runs() {
    let Some(sb) = common::sandbox("a_kept_workspace_holds_its_quota_across_runs") else {
        return;
    };
    // A chat session's workspace lives across runs: what earlier runs left counts.
    let ws = Workspace::temporary().unwrap();
    let grow =
        |name: &str| format!("with open('{name}', 'wb') as f:\n    f.write(b'x' * (700 << 10))\n");
    let limits = common::small_limits();
    let out = common::run_in(&sb, &ws, Language::Python, &grow("a.bin"), limits.clone());
    assert!(out.success(), "{out:?}");
    let out = common::run_in(&sb, &ws, Language::Python, &grow("b.bin"), limits.clone());
    refused(&out);
    assert!(out.error.unwrap().contains("for the whole workspace"));
    assert!(logical_bytes(&ws) <= BYTES, "{}", logical_bytes(&ws));
    // Counted per run instead (`weft exec` in a user's folder), the second run fits.
    let per_run = weft_sandbox::Limits {
        whole_workspace: false,
        ..limits
    };
    let out = common::run_in(&sb, &ws, Language::Python, &grow("c.bin"), per_run);
    assert!(out.success(), "{out:?}");
}
