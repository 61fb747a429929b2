//! A local stand-in for a model hub, for the pull tests: it serves files under the hub's
//! download scheme (`/{owner}/{repo}/resolve/main/{file}`, answered with a redirect carrying
//! `X-Linked-Etag`/`X-Linked-Size` as the real hub does, to `/cdn/{file}` which serves the
//! bytes with an `ETag` and honours `Range`), lists repositories
//! (`/api/models/{owner}/{repo}`), and can misbehave on purpose: cut a transfer part way,
//! send bytes slowly, or announce a wrong sha256. Every request is logged.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the hub saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub path: String,
    /// The `Range` header, if any.
    pub range: Option<String>,
}

/// How the hub serves one file.
#[derive(Clone, Debug, Default)]
pub struct HubFile {
    pub path: PathBuf,
    /// The sha256 it announces (the real one unless a test says otherwise).
    pub sha256: String,
    /// Cut the connection once this fraction of the file has been sent, on the first
    /// `cut_times` transfers.
    pub cut_at: Option<f64>,
    pub cut_times: usize,
    /// Pause this long after every 256 KiB sent.
    pub delay: Option<Duration>,
}

#[derive(Default)]
struct State {
    files: HashMap<String, HubFile>,
    log: Vec<Logged>,
    cuts_done: HashMap<String, usize>,
}

/// A running hub on a loopback port; stops accepting when dropped.
pub struct Hub {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Hub {
    pub fn start() -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the test hub");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &st);
                });
            }
        });
        Hub { port, state, stop }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Serves `file` as `/{repo}/resolve/main/{name}` (repo is `owner/name`).
    pub fn add(&self, repo: &str, name: &str, file: HubFile) {
        self.state
            .lock()
            .unwrap()
            .files
            .insert(format!("{repo}/{name}"), file);
    }

    /// The requests so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn respond(
    out: &mut TcpStream,
    status: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body)
}

fn serve(conn: TcpStream, st: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    st.lock().unwrap().log.push(Logged {
        path: path.clone(),
        range: range.clone(),
    });
    let mut out = conn;
    if let Some(repo) = path.strip_prefix("/api/models/") {
        let names: Vec<String> = st
            .lock()
            .unwrap()
            .files
            .keys()
            .filter_map(|k| k.strip_prefix(&format!("{repo}/")).map(str::to_string))
            .collect();
        let sib: Vec<serde_json::Value> = names
            .iter()
            .map(|n| serde_json::json!({"rfilename": n}))
            .collect();
        if names.is_empty() {
            return respond(
                &mut out,
                "404 Not Found",
                &[],
                b"{\"error\":\"Repository not found\"}",
            );
        }
        let body = serde_json::json!({"id": repo, "siblings": sib}).to_string();
        return respond(
            &mut out,
            "200 OK",
            &[("Content-Type".into(), "application/json".into())],
            body.as_bytes(),
        );
    }
    if let Some(rest) = path.strip_prefix("/cdn/") {
        let key = rest.to_string();
        let f = st.lock().unwrap().files.get(&key).cloned();
        let Some(f) = f else {
            return respond(&mut out, "404 Not Found", &[], b"not found");
        };
        return send_file(&mut out, st, &key, &f, range.as_deref());
    }
    // /{owner}/{repo}/resolve/main/{file}
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if parts.len() == 5 && parts[2] == "resolve" && parts[3] == "main" {
        let key = format!("{}/{}/{}", parts[0], parts[1], parts[4]);
        let f = st.lock().unwrap().files.get(&key).cloned();
        let Some(f) = f else {
            return respond(&mut out, "404 Not Found", &[], b"Entry not found");
        };
        let size = std::fs::metadata(&f.path)?.len();
        return respond(
            &mut out,
            "302 Found",
            &[
                ("Location".into(), format!("/cdn/{key}")),
                ("X-Linked-Etag".into(), format!("\"{}\"", f.sha256)),
                ("X-Linked-Size".into(), size.to_string()),
            ],
            b"",
        );
    }
    respond(&mut out, "404 Not Found", &[], b"no such route")
}

fn send_file(
    out: &mut TcpStream,
    st: &Mutex<State>,
    key: &str,
    f: &HubFile,
    range: Option<&str>,
) -> std::io::Result<()> {
    let mut file = std::fs::File::open(&f.path)?;
    let size = file.metadata()?.len();
    let start: u64 = range
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split('-').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let etag = format!("\"{}\"", &f.sha256);
    let mut head = if start > 0 {
        if start >= size {
            return respond(
                out,
                "416 Range Not Satisfiable",
                &[("Content-Range".into(), format!("bytes */{size}"))],
                b"",
            );
        }
        format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{size}\r\n",
            size - 1
        )
    } else {
        "HTTP/1.1 200 OK\r\n".to_string()
    };
    head.push_str(&format!(
        "Content-Length: {}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n",
        size - start
    ));
    out.write_all(head.as_bytes())?;
    file.seek(SeekFrom::Start(start))?;
    let cut = f.cut_at.and_then(|frac| {
        let mut g = st.lock().unwrap();
        let done = g.cuts_done.entry(key.to_string()).or_default();
        if *done < f.cut_times {
            *done += 1;
            Some(((size as f64 * frac) as u64).saturating_sub(start).max(1))
        } else {
            None
        }
    });
    let mut left = cut.unwrap_or(size - start).min(size - start);
    let mut buf = vec![0u8; 256 << 10];
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        left -= n as u64;
        if let Some(d) = f.delay {
            std::thread::sleep(d);
        }
    }
    out.flush()?;
    // A cut ends the connection mid-body: the client sees fewer bytes than announced.
    let _ = out.shutdown(std::net::Shutdown::Both);
    Ok(())
}
