//! Sandbox start-up and speed, for docs/benchmarks.md (run by bench/sandbox.sh).
//!
//! - cold: a new sandbox with an empty `.cwasm` cache: read + check + compile the module, then
//!   the first `print(1)`;
//! - cached: a new sandbox (as a new process would be) loading the `.cwasm`, then `print(1)`;
//! - warm: `print(1)` again in the same sandbox (median of 20);
//! - CPU: a pure-Python benchmark timed inside the guest and under native `python3`.

use std::process::Command;
use std::time::Instant;

use weft_sandbox::{Language, Limits, RunRequest, Sandbox, SandboxConfig, Workspace};

const CPU_SCRIPT: &str = "import time
t0 = time.perf_counter()
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
primes = [n for n in range(2, 60000) if all(n % d for d in range(2, int(n ** 0.5) + 1))]
words = {}
for i in range(300000):
    k = str(i % 5003)
    words[k] = words.get(k, 0) + i
r = fib(25)
print(f'{time.perf_counter() - t0:.4f}', r, len(primes), len(words))
";

const JS_CPU_SCRIPT: &str = "const t0 = Date.now();
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
let primes = 0;
for (let n = 2; n < 60000; n++) { let p = true; for (let d = 2; d * d <= n; d++) if (n % d === 0) { p = false; break; } if (p) primes++; }
const words = new Map();
for (let i = 0; i < 300000; i++) { const k = String(i % 5003); words.set(k, (words.get(k) || 0) + i); }
const r = fib(25);
print(((Date.now() - t0) / 1000).toFixed(4), r, primes, words.size);
";

/// `print(1)` is valid Python and valid QuickJS (which has a global `print`).
const PRINT1: &str = "print(1)";

fn run(sb: &Sandbox, ws: &Workspace, lang: Language, code: &str) -> (f64, String) {
    let limits = Limits {
        fuel: u64::MAX / 2,
        ..Limits::default()
    };
    let t0 = Instant::now();
    let out = sb
        .run(
            ws,
            &RunRequest {
                limits,
                ..RunRequest::code(lang, code)
            },
        )
        .expect("run");
    let s = t0.elapsed().as_secs_f64();
    assert!(out.success(), "{out:?}");
    (s, out.stdout)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let base = SandboxConfig::default();
    let cache = tempfile::tempdir().unwrap();
    let config = SandboxConfig {
        runtime_dir: base.runtime_dir.clone(),
        cache_dir: Some(cache.path().to_path_buf()),
    };
    let ws = Workspace::temporary().unwrap();
    println!("| language | cold: compile | cold: first print(1) | cached: load .cwasm | cached: first print(1) | warm print(1), median of 20 |");
    println!("|---|---|---|---|---|---|");
    for lang in Language::ALL {
        let sb = Sandbox::new(config.clone()).unwrap();
        let p = sb.prepare(lang).unwrap();
        let (first, _) = run(&sb, &ws, lang, PRINT1);
        drop(sb);
        let sb = Sandbox::new(config.clone()).unwrap();
        let c = sb.prepare(lang).unwrap();
        let (cached_first, _) = run(&sb, &ws, lang, PRINT1);
        let warm = median((0..20).map(|_| run(&sb, &ws, lang, PRINT1).0).collect());
        println!(
            "| {} | {:.2} s | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms |",
            lang.name(),
            p.took.as_secs_f64(),
            first * 1e3,
            c.took.as_secs_f64() * 1e3,
            cached_first * 1e3,
            warm * 1e3
        );
    }
    let sb = Sandbox::new(config).unwrap();
    let mut inside = Vec::new();
    let mut whole = Vec::new();
    let mut native = Vec::new();
    let mut js = Vec::new();
    for _ in 0..3 {
        let (s, out) = run(&sb, &ws, Language::Python, CPU_SCRIPT);
        whole.push(s);
        inside.push(
            out.split_whitespace()
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap(),
        );
        let n = Command::new("python3")
            .arg("-c")
            .arg(CPU_SCRIPT)
            .output()
            .expect("python3");
        let text = String::from_utf8_lossy(&n.stdout).into_owned();
        assert_eq!(
            text.split_whitespace().skip(1).collect::<Vec<_>>(),
            out.split_whitespace().skip(1).collect::<Vec<_>>()
        );
        native.push(
            text.split_whitespace()
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap(),
        );
        let (_, out) = run(&sb, &ws, Language::Javascript, JS_CPU_SCRIPT);
        js.push(
            out.split_whitespace()
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap(),
        );
    }
    let native_version = Command::new("python3").arg("--version").output().unwrap();
    let (i, n) = (median(inside), median(native));
    println!();
    println!(
        "| CPU-bound script (fib(25), primes < 60000, 300k dict updates), median of 3 | seconds |"
    );
    println!("|---|---|");
    println!(
        "| native {} | {n:.3} |",
        String::from_utf8_lossy(&native_version.stdout).trim()
    );
    println!("| sandboxed CPython 3.12 (WASI, fuel metering on), timed inside | {i:.3} ({:.2}x native) |", i / n);
    println!(
        "| sandboxed CPython, whole run incl. start | {:.3} |",
        median(whole)
    );
    println!(
        "| sandboxed QuickJS, same work in JS, timed inside | {:.3} |",
        median(js)
    );
}
