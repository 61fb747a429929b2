//! A throwaway Postgres server for tests: a fresh cluster in a temporary folder, started on a
//! free loopback port as the unprivileged `nobody` (Postgres refuses to run as root), trusted
//! local connections as user `weft`, stopped and deleted on drop. Needs Debian's
//! `postgresql` package (any version): missing, the test skips loudly, or fails under CI.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The newest installed server's programs (`/usr/lib/postgresql/<version>/bin`).
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

/// A running Postgres; stopped and its folder removed on drop.
pub struct Postgres {
    child: Child,
    dir: PathBuf,
    pub port: u16,
    bin: PathBuf,
}

fn missing(why: &str) -> Option<Postgres> {
    if std::env::var_os("CI").is_some() {
        panic!("Postgres is needed under CI: {why} (apt-get install postgresql)");
    }
    eprintln!("\n*** SKIPPING the Postgres run: {why} (apt-get install postgresql) ***\n");
    None
}

/// Runs `cmd` as `nobody` when this process is root (Postgres refuses root), else as is.
fn as_postgres_user(bin: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Postgres {
    /// Starts a fresh server, or returns None (after a loud message) when Postgres is not
    /// installed outside CI.
    pub fn start(tag: &str) -> Option<Postgres> {
        let Some(bin) = bin_dir() else {
            return missing("no /usr/lib/postgresql/<version>/bin/initdb");
        };
        let initdb = bin.join("initdb");
        let dir = std::env::temp_dir().join(format!("weft-pg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating the Postgres folder");
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "nobody"])
                .arg(&dir)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "chown nobody {}", dir.display());
        }
        let data = dir.join("data");
        let out = as_postgres_user(&initdb)
            .arg("-D")
            .arg(&data)
            .args(["-U", "weft", "--auth=trust", "--no-sync"])
            .output()
            .expect("running initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let child = as_postgres_user(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(&dir)
            .args(["-h", "127.0.0.1", "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting postgres");
        let mut pg = Postgres {
            child,
            dir,
            port,
            bin,
        };
        pg.wait_accepting();
        Some(pg)
    }

    fn wait_accepting(&mut self) {
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("postgres exited at start: {st}");
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "weft",
                ])
                .stdout(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ready {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "postgres did not accept connections"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `postgres://weft@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://weft@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // runuser passes SIGKILL's effect down only to itself: stop postgres by its pid file.
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().map(str::to_string));
        if let Some(pid) = pid {
            let _ = Command::new("kill").args(["-QUIT", &pid]).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
