//! The admin suite's fixtures: a database (SQLite in a private WEFT_HOME, or a throwaway
//! Postgres), servers on it, keys made with `weft keys create`, and requests with a key.

use std::path::PathBuf;
use std::process::Command;

use weft_core::test_support::model_path;
use weft_tests::postgres::Postgres;
use weft_tests::{weft_binary, Client, Response, Server};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database and a private WEFT_HOME; dropped (Postgres stopped, folder removed) at the end.
pub struct Db {
    pub home: PathBuf,
    pg: Option<Postgres>,
    model: PathBuf,
}

impl Db {
    /// None (after a loud message) when the model or Postgres is missing outside CI.
    pub fn new(backend: Backend, tag: &str) -> Option<Db> {
        let model = model_path("smollm2")?;
        let tag = format!("{tag}-{backend:?}").to_lowercase();
        let home = std::env::temp_dir().join(format!("weft-admin-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        let pg = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(Postgres::start(&tag)?),
        };
        Some(Db { home, pg, model })
    }

    /// Whether this is the embedded SQLite (`$WEFT_HOME/weft.db`).
    pub fn is_sqlite(&self) -> bool {
        self.pg.is_none()
    }

    /// `--database URL` for Postgres; nothing for SQLite, which must be the default
    /// (`$WEFT_HOME/weft.db`).
    pub fn db_args(&self) -> Vec<String> {
        match &self.pg {
            Some(pg) => vec!["--database".into(), pg.url()],
            None => vec![],
        }
    }

    /// `weft serve` on this database with SmolLM2 as `smol`, plus `args`.
    pub fn serve(&self, args: &[&str]) -> Server {
        self.serve_env(args, &[])
    }

    /// Like `serve`, with more environment (e.g. WEFT_ADMIN_KEY).
    pub fn serve_env(&self, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut all: Vec<String> = vec![
            "--model".into(),
            format!("smol={}", self.model.display()),
            "--ctx".into(),
            "512".into(),
            "--parallel".into(),
            "1".into(),
        ];
        all.extend(self.db_args());
        all.extend(args.iter().map(|s| s.to_string()));
        let mut envs: Vec<(&str, &std::path::Path)> = vec![("WEFT_HOME", self.home.as_path())];
        envs.extend(env.iter().map(|(k, v)| (*k, std::path::Path::new(v))));
        Server::start_env(&all, &envs)
    }

    /// `weft keys create --role ROLE`: the key (its last line of output).
    pub fn cli_key(&self, role: &str) -> String {
        let out = Command::new(weft_binary())
            .env("WEFT_HOME", &self.home)
            .args(["keys", "create", "--role", role])
            .args(self.db_args())
            .output()
            .expect("running weft keys create");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "weft keys create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let key = stdout.lines().last().unwrap_or("").trim().to_string();
        assert!(key.starts_with("weft_"), "{stdout}");
        key
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A request with `Authorization: Bearer KEY` (none when `key` is empty).
pub fn call(c: &Client, key: &str, method: &str, path: &str, body: Option<&str>) -> Response {
    let auth = (!key.is_empty()).then(|| format!("Bearer {key}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    c.try_request(method, path, body, &headers)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// Creates a key through the API with an admin key; returns (id, key).
pub fn api_key(c: &Client, admin: &str, body: serde_json::Value) -> (String, String) {
    let r = call(c, admin, "POST", "/api/v1/keys", Some(&body.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    let j = r.json();
    (
        j["id"].as_str().unwrap().to_string(),
        j["key"].as_str().unwrap().to_string(),
    )
}

/// Runs `f` on SQLite and on Postgres (each skipped loudly when unavailable outside CI).
#[macro_export]
macro_rules! on_both {
    ($name:ident, $sqlite:ident, $postgres:ident) => {
        #[test]
        fn $sqlite() {
            if let Some(db) =
                $crate::harness::Db::new($crate::harness::Backend::Sqlite, stringify!($name))
            {
                $name(&db);
            }
        }
        #[test]
        fn $postgres() {
            if let Some(db) =
                $crate::harness::Db::new($crate::harness::Backend::Postgres, stringify!($name))
            {
                $name(&db);
            }
        }
    };
}
