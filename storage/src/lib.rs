//! weft-storage: the server's persistent state (API keys, users, tenants, settings,
//! moderation rules, audit, chat-UI sessions, A/B tests, adapters, model jobs, stored responses, shared rate limits) behind one interface,
//! [`Storage`], on one of two backends:
//!
//! - SQLite, embedded (the default: `$WEFT_HOME/weft.db`, WAL), for one server;
//! - Postgres (`postgres://…`), for several replicas sharing state.
//!
//! Queries are built at run time (`sqlx::query`), written once with `$N` placeholders, which
//! both SQLite and Postgres accept, and run on whichever pool is open. Times are Unix seconds.
//! The schema is versioned ([`migrate`]) and brought up to date when the storage opens.

/// Runs `$body` with `$p` bound to whichever pool is open (the same SQL serves both).
macro_rules! on_pool {
    ($s:expr, |$p:ident| $body:expr) => {
        match &*$s.db {
            $crate::Db::Sqlite($p) => $body,
            $crate::Db::Postgres($p) => $body,
        }
    };
}

mod ab;
mod adapters;
mod audit;
mod dump;
mod error;
mod jobs;
mod keys;
mod migrate;
mod model_aliases;
mod moderation;
mod private;
pub mod rate_limits;
mod responses;
mod sessions;
mod settings;
mod tenants;
mod users;

use std::path::Path;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{PgPool, SqlitePool};

pub use ab::{AbTest, AbVote, NewAbTest, NewAbVote, Variant, WHOLE as AB_WHOLE};
pub use adapters::{Adapter, NewAdapter};
pub use audit::{AuditEntry, NewAudit};
pub use dump::{DumpItem, Row, NOT_BACKED_UP, TABLES};
pub use error::{Result, StorageError};
pub use jobs::{JobOwner, JobRow, JOB_LIVE};
pub use keys::{ApiKey, NewKey};
pub use model_aliases::ModelAlias;
pub use moderation::{ModerationRule, NewRule};
pub use private::{create_private_dir, restrict_dir};
pub use responses::{ResponseBound, StoredResponse};
pub use tenants::{NewTenant, Tenant, TenantPatch};
pub use users::{NewUser, User, UserPatch};

/// Reads a column of either backend's row (the column types this schema uses).
pub(crate) trait Get {
    fn text(&self, col: &str) -> Result<String>;
    fn text_opt(&self, col: &str) -> Result<Option<String>>;
    fn int(&self, col: &str) -> Result<i64>;
    fn int_opt(&self, col: &str) -> Result<Option<i64>>;
    fn real(&self, col: &str) -> Result<f64>;
    fn real_opt(&self, col: &str) -> Result<Option<f64>>;
}

macro_rules! impl_get {
    ($row:ty) => {
        impl Get for $row {
            fn text(&self, col: &str) -> Result<String> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn text_opt(&self, col: &str) -> Result<Option<String>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn int(&self, col: &str) -> Result<i64> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn int_opt(&self, col: &str) -> Result<Option<i64>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn real(&self, col: &str) -> Result<f64> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn real_opt(&self, col: &str) -> Result<Option<f64>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
        }
    };
}
impl_get!(sqlx::sqlite::SqliteRow);
impl_get!(sqlx::postgres::PgRow);

enum Db {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The open database (cheap to clone: the pools are shared).
#[derive(Clone)]
pub struct Storage {
    db: std::sync::Arc<Db>,
}

impl Storage {
    /// Opens `url` (`sqlite://PATH`, a bare file path, or `postgres://…`) and migrates it.
    pub async fn open(url: &str) -> Result<Storage> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Self::postgres(url).await
        } else if let Some(path) = url.strip_prefix("sqlite://") {
            Self::sqlite(Path::new(path)).await
        } else if url.contains("://") {
            Err(StorageError::BadUrl(url.to_string()))
        } else {
            Self::sqlite(Path::new(url)).await
        }
    }

    /// The embedded database at `path` (created with its folder if missing), in WAL mode so
    /// readers never wait for the writer.
    pub async fn sqlite(path: &Path) -> Result<Storage> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private::create_private_dir(dir)
                .map_err(|e| StorageError::Open(format!("creating {}: {e}", dir.display())))?;
        }
        // Key hashes and sessions live here: owner-only, as are its -wal and -shm.
        private::prepare_db_file(path)
            .map_err(|e| StorageError::Open(format!("{}: {e}", path.display())))?;
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            // Two processes (a server and `weft keys create`) may write at once.
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts)
            .await
            .map_err(|e| StorageError::Open(format!("{}: {e}", path.display())))?;
        migrate::sqlite(&pool).await?;
        private::restrict_db_files(path)
            .map_err(|e| StorageError::Open(format!("{}: {e}", path.display())))?;
        Ok(Storage {
            db: std::sync::Arc::new(Db::Sqlite(pool)),
        })
    }

    /// A Postgres database shared by several servers.
    pub async fn postgres(url: &str) -> Result<Storage> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|e| StorageError::Open(format!("{}: {e}", redact(url))))?;
        migrate::postgres(&pool).await?;
        Ok(Storage {
            db: std::sync::Arc::new(Db::Postgres(pool)),
        })
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match *self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// The schema version this build migrates to.
    pub fn schema_version(&self) -> i64 {
        migrate::latest()
    }

    /// Closes the pools (waits for checked-out connections).
    pub async fn close(&self) {
        match &*self.db {
            Db::Sqlite(p) => p.close().await,
            Db::Postgres(p) => p.close().await,
        }
    }
}

/// A URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// 128 bits from the OS random generator, as 32 lowercase hex digits: an id nobody can guess
/// or count from another (ids appear in URLs and logs; they are not secrets, owners are
/// checked, but a guessable id would tell one thing's existence from another's).
pub fn random_hex128() -> String {
    let mut b = [0u8; 16];
    // The OS generator does not fail on a working system; without it no key, password hash
    // or id of this server could be made safely, so stopping is right.
    getrandom::fill(&mut b).expect("the OS random generator is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A fresh row id such as `key_3f9a…`: the prefix, `_` and [`random_hex128`].
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_hex128())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact("postgres://weft:secret@db:5432/weft"),
            "postgres://weft:***@db:5432/weft"
        );
        assert_eq!(redact("postgres://weft@db/weft"), "postgres://weft@db/weft");
    }

    #[test]
    fn ids_are_128_random_bits() {
        let id = new_id("key");
        let hex = id.strip_prefix("key_").expect("the prefix");
        assert_eq!(hex.len(), 32, "{id}");
        assert!(hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        let many: std::collections::HashSet<String> = (0..1000).map(|_| random_hex128()).collect();
        assert_eq!(many.len(), 1000);
        // Every bit position takes both values across the sample (a counter or a clock in
        // the id would leave its high bits fixed).
        let (mut ones, mut zeros) = (0u128, 0u128);
        for h in &many {
            let v = u128::from_str_radix(h, 16).unwrap();
            ones |= v;
            zeros |= !v;
        }
        assert_eq!((ones, zeros), (u128::MAX, u128::MAX));
    }
}
