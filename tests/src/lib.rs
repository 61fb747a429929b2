//! Shared helpers for the cross-crate integration tests in `tests/tests/`: starting the real
//! `weft serve` binary on a free loopback port, and a minimal HTTP/1.1 client (so tests need
//! no HTTP crate and can also drop a connection mid-stream).

pub mod browser;
pub mod hub;
pub mod postgres;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Builds (if needed) and returns the `weft` binary of this workspace.
pub fn weft_binary() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["build", "-q", "-p", "weft-server", "--bin", "weft"])
        .status()
        .expect("running cargo build for the weft binary");
    assert!(status.success(), "cargo build -p weft-server failed");
    // Test executables live in <target>/debug/deps; the binary in <target>/debug.
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join(if cfg!(windows) { "weft.exe" } else { "weft" });
    assert!(bin.exists(), "{} missing after build", bin.display());
    bin
}

/// A running `weft serve`; killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    /// Lines the server printed on stderr so far (collected by a thread).
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `weft serve --model MODEL --port 0 ARGS...` and waits until `/ready` is 200.
    pub fn start(model: &std::path::Path, args: &[&str]) -> Server {
        let mut all = vec!["--model".to_string(), model.display().to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        Self::start_args(&all)
    }

    /// Starts `weft serve --port 0 ARGS...` (models given in `args`) and waits until `/ready`
    /// is 200.
    pub fn start_args(args: &[String]) -> Server {
        Self::start_env(args, &[])
    }

    /// Like `start_args` with extra environment variables (e.g. a private WEFT_HOME).
    /// Without a WEFT_HOME in `env`, the server gets this test process's own home (a temporary
    /// folder), never the user's `~/.weft`: the admin database there holds model names, so
    /// one test binary's names must not show up in another's servers.
    pub fn start_env(args: &[String], env: &[(&str, &std::path::Path)]) -> Server {
        let home = std::env::temp_dir().join(format!("weft-test-home-{}", std::process::id()));
        let mut cmd = Command::new(weft_binary());
        if !env.iter().any(|(k, _)| *k == "WEFT_HOME") {
            cmd.env("WEFT_HOME", &home);
        }
        let mut child = cmd
            .envs(env.iter().map(|(k, v)| (k, v.as_os_str())))
            .arg("serve")
            .args(["--host", "127.0.0.1", "--port", "0", "--threads", "2"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting weft serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
                eprintln!("[weft] {line}");
                log2.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("weft serve did not report its address");
        let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
        let mut s = Server { child, port, log };
        s.wait_ready();
        s
    }

    fn wait_ready(&mut self) {
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("weft serve exited early: {st}; log: {:?}", self.log());
            }
            if let Ok(r) = self.try_request("GET", "/ready", None, &[]) {
                if r.status == 200 {
                    return;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "server not ready in time"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A handle on a server another `Server` started (for client threads); killing nothing
    /// on drop.
    pub fn attach(port: u16) -> Client {
        Client { port }
    }

    /// The server's stderr lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        self.client().base()
    }

    /// A client of this server (cheap; usable from other threads).
    pub fn client(&self) -> Client {
        Client { port: self.port }
    }

    /// Sends a request and reads the whole response.
    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> Response {
        self.client().request(method, path, body)
    }

    /// Like `request` with extra headers.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Response> {
        self.client().try_request(method, path, body, headers)
    }

    /// An open connection (for tests that drop it mid-stream).
    pub fn connect(&self) -> std::io::Result<TcpStream> {
        self.client().connect()
    }

    /// Process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the server to exit by itself.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("waiting for weft serve")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of a running server: one connection per request.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    pub port: u16,
}

impl Client {
    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends a request and reads the whole response.
    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> Response {
        self.try_request(method, path, body, &[])
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Like `request` with extra headers.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Response> {
        let mut s = self.connect()?;
        send(&mut s, method, path, body.map(str::as_bytes), headers)?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        Ok(Response::parse(&raw))
    }

    /// An open connection (for tests that drop it mid-stream).
    pub fn connect(&self) -> std::io::Result<TcpStream> {
        let s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(600)))?;
        Ok(s)
    }
}

/// Writes an HTTP/1.1 request with `Connection: close`.
pub fn send(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    headers: &[(&str, &str)],
) -> std::io::Result<()> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    if let Some(b) = body {
        s.write_all(b)?;
    }
    s.flush()
}

/// A parsed HTTP response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// Parses a full HTTP/1.1 response (chunked bodies are de-chunked).
    pub fn parse(raw: &[u8]) -> Response {
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("no end of headers");
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut body = raw[split + 4..].to_vec();
        if headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
        {
            body = dechunk(&body);
        }
        Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// `data:` payloads of an SSE body.
    pub fn sse_data(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.trim_start().to_string())
            .collect()
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = b.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&b[..nl]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = nl + 2;
        let end = (start + size).min(b.len());
        out.extend_from_slice(&b[start..end]);
        b = &b[(end + 2).min(b.len())..];
    }
    out
}

/// Runs `python3 tests/py/SCRIPT BASE_URL ARGS...`; returns None (after a loud message) when
/// the Python packages it needs are missing outside CI.
pub fn python(script: &str, base: &str, args: &[&str], needs: &[&str]) -> Option<String> {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py");
    for m in needs {
        let ok = Command::new("python3")
            .args(["-c", &format!("import {m}")])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            if std::env::var_os("CI").is_some() {
                panic!("python package {m} is missing; CI installs scripts/requirements-test.txt");
            }
            eprintln!("\n*** SKIPPING: python package {m} missing (pip install -r scripts/requirements-test.txt) ***\n");
            return None;
        }
    }
    let out = Command::new("python3")
        .arg(py.join(script))
        .arg(base)
        .args(args)
        .output()
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed:\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    Some(stdout)
}
