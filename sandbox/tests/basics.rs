//! Basic runs: output, exit codes, arguments, files, both languages.

mod common;

use weft_sandbox::{Language, RunRequest, Source, Workspace};

#[test]
fn python_prints_and_exits() {
    let Some(sb) = common::sandbox("python_prints_and_exits") else {
        return;
    };
    let (out, _ws) = common::py(&sb, "import sys, os\nprint(6 * 7)\nprint(os.getcwd())\nprint(sys.version_info[:2])\nprint('err', file=sys.stderr)\n");
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout, "42\n/workspace\n(3, 12)\n");
    assert_eq!(out.stderr, "err\n");
    let (out, _ws) = common::py(&sb, "import sys\nsys.exit(3)\n");
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    assert_eq!(out.stopped, None);
    let (out, _ws) = common::py(&sb, "raise ValueError('boom')\n");
    assert_eq!(out.exit_code, Some(1), "{out:?}");
    assert!(out.stderr.contains("ValueError: boom"), "{}", out.stderr);
    assert!(out.stderr.contains("<main.py>\", line 1"), "{}", out.stderr);
}

#[test]
fn python_future_imports_and_stdlib() {
    let Some(sb) = common::sandbox("python_future_imports_and_stdlib") else {
        return;
    };
    let (out, _ws) = common::py(
        &sb,
        "from __future__ import annotations\nimport json, csv, math, re, collections, datetime, sqlite3\nprint(json.dumps({'a': math.factorial(10)}))\n",
    );
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout, "{\"a\": 3628800}\n");
}

#[test]
fn python_files_and_args() {
    let Some(sb) = common::sandbox("python_files_and_args") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    ws.write("data/in.txt", b"hello").unwrap();
    ws.write("main.py", b"import sys\ntext = open('data/in.txt').read()\nopen('out.csv', 'w').write('a,b\\n1,2\\n')\nprint(text, sys.argv, __file__)\n").unwrap();
    let out = sb
        .run(
            &ws,
            &RunRequest {
                language: Language::Python,
                source: Source::File("main.py".into()),
                args: vec!["x".into(), "y z".into()],
                limits: common::small_limits(),
            },
        )
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout,
        "hello ['/workspace/main.py', 'x', 'y z'] /workspace/main.py\n"
    );
    assert_eq!(out.files.created.len(), 1, "{:?}", out.files);
    assert_eq!(out.files.created[0].path, "out.csv");
    assert_eq!(out.files.created[0].bytes, 8);
    assert_eq!(ws.read("out.csv").unwrap(), b"a,b\n1,2\n");
}

#[test]
fn javascript_prints_and_writes() {
    let Some(sb) = common::sandbox("javascript_prints_and_writes") else {
        return;
    };
    let ws = Workspace::temporary().unwrap();
    let out = common::run_in(
        &sb,
        &ws,
        Language::Javascript,
        "console.log(6 * 7);\nlet f = std.open('out.txt', 'w'); f.puts('js'); f.close();\nprint(os.getcwd()[0]);\n",
        common::small_limits(),
    );
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout, "42\n/workspace\n");
    assert_eq!(ws.read("out.txt").unwrap(), b"js");
    let out = common::run_in(
        &sb,
        &ws,
        Language::Javascript,
        "throw new Error('boom');",
        common::small_limits(),
    );
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stderr.contains("boom"), "{out:?}");
}
