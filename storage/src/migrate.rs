//! Versioned migrations: numbered SQL files per backend, embedded in the binary and applied in
//! order at open. A `weft_migrations` table records which ran, so each runs once; on Postgres
//! an advisory lock keeps two replicas starting together from applying the same one twice.

use sqlx::{Database, Encode, Executor, IntoArguments, PgPool, Postgres, Sqlite, SqlitePool, Type};

use crate::error::{Result, StorageError};

/// One schema step: its version (increasing, never reused) and the SQL per backend.
struct Migration {
    version: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sqlite: include_str!("../migrations/sqlite/0001_init.sql"),
        postgres: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "moderation",
        sqlite: include_str!("../migrations/sqlite/0002_moderation.sql"),
        postgres: include_str!("../migrations/postgres/0002_moderation.sql"),
    },
    Migration {
        version: 4,
        name: "ab_adapters_usage",
        sqlite: include_str!("../migrations/sqlite/0004_ab_adapters_usage.sql"),
        postgres: include_str!("../migrations/postgres/0004_ab_adapters_usage.sql"),
    },
    Migration {
        version: 6,
        name: "chat_sessions",
        sqlite: include_str!("../migrations/sqlite/0006_chat_sessions.sql"),
        postgres: include_str!("../migrations/postgres/0006_chat_sessions.sql"),
    },
    Migration {
        version: 7,
        name: "jobs",
        sqlite: include_str!("../migrations/sqlite/0007_jobs.sql"),
        postgres: include_str!("../migrations/postgres/0007_jobs.sql"),
    },
    Migration {
        version: 8,
        name: "model_aliases",
        sqlite: include_str!("../migrations/sqlite/0008_model_aliases.sql"),
        postgres: include_str!("../migrations/postgres/0008_model_aliases.sql"),
    },
    Migration {
        version: 9,
        name: "owners",
        sqlite: include_str!("../migrations/sqlite/0009_owners.sql"),
        postgres: include_str!("../migrations/postgres/0009_owners.sql"),
    },
    Migration {
        version: 10,
        name: "responses",
        sqlite: include_str!("../migrations/sqlite/0010_responses.sql"),
        postgres: include_str!("../migrations/postgres/0010_responses.sql"),
    },
    Migration {
        version: 11,
        name: "rate_limits",
        sqlite: include_str!("../migrations/sqlite/0011_rate_limits.sql"),
        postgres: include_str!("../migrations/postgres/0011_rate_limits.sql"),
    },
];

const LEDGER: &str = "CREATE TABLE IF NOT EXISTS weft_migrations (
    version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

const RECORD: &str = "INSERT INTO weft_migrations (version, name, applied_at) VALUES ($1, $2, $3)";

/// An arbitrary constant naming the migration lock among the database's advisory locks.
const PG_LOCK: i64 = 0x0077_6566_746d_6967;

pub async fn sqlite(pool: &SqlitePool) -> Result<()> {
    sqlx::query(LEDGER).execute(pool).await?;
    for m in MIGRATIONS {
        // BEGIN IMMEDIATE takes the write lock first, so a second process waits, then sees
        // the ledger row and skips.
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        apply::<Sqlite>(&mut tx, m, m.sqlite).await?;
        tx.commit().await?;
    }
    Ok(())
}

pub async fn postgres(pool: &PgPool) -> Result<()> {
    // One transaction for every step, under the lock: a replica starting alongside waits for
    // all of them, and a failed step leaves the schema as it was.
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(PG_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::query(LEDGER).execute(&mut *tx).await?;
    for m in MIGRATIONS {
        apply::<Postgres>(&mut tx, m, m.postgres).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Runs step `m` (its `sql` for this backend) on `conn` unless the ledger says it ran, and
/// records it. Written once for both backends so they cannot drift apart; the callers only
/// choose the transactions it runs in.
async fn apply<DB>(conn: &mut DB::Connection, m: &Migration, sql: &'static str) -> Result<()>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'a> i64: Encode<'a, DB>,
    for<'a> &'a str: Encode<'a, DB>,
    i64: Type<DB>,
    for<'a> &'a str: Type<DB>,
{
    let done = sqlx::query::<DB>("SELECT 1 FROM weft_migrations WHERE version = $1")
        .bind(m.version)
        .fetch_optional(&mut *conn)
        .await?;
    if done.is_some() {
        return Ok(());
    }
    sqlx::raw_sql(sql)
        .execute(&mut *conn)
        .await
        .map_err(|e| failed(m, e))?;
    sqlx::query::<DB>(RECORD)
        .bind(m.version)
        .bind(m.name)
        .bind(crate::now())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

fn failed(m: &Migration, e: sqlx::Error) -> StorageError {
    StorageError::Open(format!("migration {} ({}) failed: {e}", m.version, m.name))
}

/// The newest schema version this build knows.
pub fn latest() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}
