//! Model jobs (pull, import, convert, quantize): one row per job, written by the server process
//! that runs it (its *owner*) and read by every replica sharing the database.
//!
//! - A finished row is final: the owner's later writes never change it, so a job another
//!   process declared interrupted stays so even if its owner was only slow.
//! - Another replica cannot reach the owner's threads; it asks the owner to stop a job by
//!   setting `cancel_requested`, which the owner polls.
//! - Orphans (jobs left queued or running by a process that died) are found differently per
//!   backend. SQLite serves one server per file, so at start every live job of another process
//!   is an orphan. On Postgres each owner holds a session advisory lock for as long as it lives
//!   ([`Storage::job_owner`]): a live job whose owner's lock can be taken has lost its owner.
//!
//! "Owner" here is the process; the principal (API key) that asked for a job is its
//! `principal`, and only that principal sees the job (the server checks it; admins list
//! everyone's only when they ask, [`Storage::jobs_of`]).

use crate::{Get, Result, Storage, StorageError};
use serde_json::{Map, Value};

/// The statuses of a job that has not ended.
pub const JOB_LIVE: [&str; 2] = ["queued", "running"];

/// One job as stored (the server's job record, with its owner).
#[derive(Clone, Debug, PartialEq)]
pub struct JobRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub phase: String,
    pub unit: String,
    pub done: i64,
    pub total: i64,
    pub percent: f64,
    pub request: Value,
    pub detail: Map<String, Value>,
    pub result: Option<Value>,
    pub error: Option<String>,
    /// Unix seconds with fractions.
    pub created_at: f64,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    pub owner: String,
    pub owner_lock: i64,
    pub cancel_requested: bool,
    /// Who asked for it: a key id, `env` or `open`.
    pub principal: String,
}

/// This process as the owner of the jobs it runs. On Postgres it holds the advisory lock that
/// tells other replicas it is alive, on a connection of its own, until dropped.
pub struct JobOwner {
    pub id: String,
    pub lock: i64,
    _held: Option<sqlx::PgConnection>,
}

const COLUMNS: &str = "id, kind, status, phase, unit, done, total, percent, request, detail, \
    result, error, created_at, started_at, finished_at, owner, owner_lock, cancel_requested, principal";

fn json(id: &str, col: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| StorageError::Corrupt(format!("job {id} {col}: {e}")))
}

fn read(r: &impl Get) -> Result<JobRow> {
    let id = r.text("id")?;
    let detail = match json(&id, "detail", &r.text("detail")?)? {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let result = match r.text_opt("result")? {
        Some(t) => Some(json(&id, "result", &t)?),
        None => None,
    };
    Ok(JobRow {
        request: json(&id, "request", &r.text("request")?)?,
        kind: r.text("kind")?,
        status: r.text("status")?,
        phase: r.text("phase")?,
        unit: r.text("unit")?,
        done: r.int("done")?,
        total: r.int("total")?,
        percent: r.real("percent")?,
        detail,
        result,
        error: r.text_opt("error")?,
        created_at: r.real("created_at")?,
        started_at: r.real_opt("started_at")?,
        finished_at: r.real_opt("finished_at")?,
        owner: r.text("owner")?,
        owner_lock: r.int("owner_lock")?,
        cancel_requested: r.int("cancel_requested")? != 0,
        principal: r.text("principal")?,
        id,
    })
}

fn now_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Storage {
    /// Makes this process a job owner (see the module comment).
    pub async fn job_owner(&self) -> Result<JobOwner> {
        let id = crate::new_id("owner");
        // Any i64 will do as long as two live processes do not pick the same one: the id's
        // first 64 random bits.
        let lock = id
            .get(6..22)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or(1) as i64;
        let held = match &*self.db {
            crate::Db::Sqlite(_) => None,
            crate::Db::Postgres(p) => {
                let mut c = p.acquire().await?.detach();
                sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(lock)
                    .execute(&mut c)
                    .await?;
                Some(c)
            }
        };
        Ok(JobOwner {
            id,
            lock,
            _held: held,
        })
    }

    /// Writes a job as its owner sees it: inserts it, or updates it unless it has ended (an
    /// ended row never changes) or belongs to another owner. `cancel_requested` is never
    /// cleared by this write.
    pub async fn write_job(&self, j: &JobRow) -> Result<()> {
        let sql = format!(
            "INSERT INTO jobs ({COLUMNS}, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, phase = excluded.phase, \
             unit = excluded.unit, done = excluded.done, total = excluded.total, \
             percent = excluded.percent, detail = excluded.detail, result = excluded.result, \
             error = excluded.error, started_at = excluded.started_at, \
             finished_at = excluded.finished_at, updated_at = excluded.updated_at \
             WHERE jobs.owner = excluded.owner AND jobs.status IN ('queued', 'running')"
        );
        let sql = sqlx::AssertSqlSafe(sql);
        on_pool!(self, |p| {
            sqlx::query(sql)
                .bind(&j.id)
                .bind(&j.kind)
                .bind(&j.status)
                .bind(&j.phase)
                .bind(&j.unit)
                .bind(j.done)
                .bind(j.total)
                .bind(j.percent)
                .bind(j.request.to_string())
                .bind(Value::Object(j.detail.clone()).to_string())
                .bind(j.result.as_ref().map(Value::to_string))
                .bind(&j.error)
                .bind(j.created_at)
                .bind(j.started_at)
                .bind(j.finished_at)
                .bind(&j.owner)
                .bind(j.owner_lock)
                .bind(j.cancel_requested as i64)
                .bind(&j.principal)
                .bind(now_f64())
                .execute(p)
                .await?;
            Ok(())
        })
    }

    /// One job, or None.
    pub async fn job(&self, id: &str) -> Result<Option<JobRow>> {
        let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM jobs WHERE id = $1"));
        on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .fetch_optional(p)
            .await?
            .map(|r| read(&r))
            .transpose())
    }

    /// The newest `limit` jobs, oldest first.
    pub async fn jobs(&self, limit: i64) -> Result<Vec<JobRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM jobs ORDER BY created_at DESC, id DESC LIMIT $1"
        ));
        let mut rows: Vec<JobRow> = on_pool!(self, |p| sqlx::query(sql)
            .bind(limit)
            .fetch_all(p)
            .await?
            .iter()
            .map(read)
            .collect::<Result<_>>())?;
        rows.reverse();
        Ok(rows)
    }

    /// The newest `limit` jobs `principal` asked for, oldest first.
    pub async fn jobs_of(&self, principal: &str, limit: i64) -> Result<Vec<JobRow>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM jobs WHERE principal = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2"
        ));
        let mut rows: Vec<JobRow> = on_pool!(self, |p| sqlx::query(sql)
            .bind(principal)
            .bind(limit)
            .fetch_all(p)
            .await?
            .iter()
            .map(read)
            .collect::<Result<_>>())?;
        rows.reverse();
        Ok(rows)
    }

    /// Asks a job's owner to stop it (a no-op for an ended job). Returns the job, or None.
    pub async fn request_job_cancel(&self, id: &str) -> Result<Option<JobRow>> {
        let sql = "UPDATE jobs SET cancel_requested = 1 WHERE id = $1 AND status IN ('queued', 'running')";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(id)
            .execute(p)
            .await
            .map(drop))?;
        self.job(id).await
    }

    /// The live jobs of `owner` that someone asked to stop.
    pub async fn jobs_to_cancel(&self, owner: &str) -> Result<Vec<String>> {
        let sql = "SELECT id FROM jobs WHERE owner = $1 AND cancel_requested <> 0 AND status IN ('queued', 'running')";
        on_pool!(self, |p| sqlx::query(sql)
            .bind(owner)
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| r.text("id"))
            .collect())
    }

    /// Marks failed, with `message` (plus `pull_hint` for pulls), every live job whose owner
    /// is gone (see the module comment: on SQLite only `at_start`, where every other owner's
    /// live job counts). Returns how many.
    pub async fn fail_orphaned_jobs(
        &self,
        me: &JobOwner,
        at_start: bool,
        message: &str,
        pull_hint: &str,
    ) -> Result<u64> {
        let fail = "UPDATE jobs SET status = 'failed', phase = 'failed', \
            error = $1 || CASE WHEN kind = 'pull' THEN $2 ELSE '' END, finished_at = $3, \
            updated_at = $3 WHERE owner_lock = $4 AND owner <> $5 AND status IN ('queued', 'running')";
        let owners = "SELECT DISTINCT owner_lock FROM jobs WHERE owner <> $1 AND status IN ('queued', 'running')";
        let at = now_f64();
        match &*self.db {
            crate::Db::Sqlite(p) => {
                if !at_start {
                    return Ok(0);
                }
                let sql = "UPDATE jobs SET status = 'failed', phase = 'failed', \
                    error = $1 || CASE WHEN kind = 'pull' THEN $2 ELSE '' END, finished_at = $3, \
                    updated_at = $3 WHERE owner <> $4 AND status IN ('queued', 'running')";
                let r = sqlx::query(sql)
                    .bind(message)
                    .bind(pull_hint)
                    .bind(at)
                    .bind(&me.id)
                    .execute(p)
                    .await?;
                Ok(r.rows_affected())
            }
            crate::Db::Postgres(p) => {
                let locks: Vec<i64> = sqlx::query(owners)
                    .bind(&me.id)
                    .fetch_all(p)
                    .await?
                    .iter()
                    .map(|r| r.int("owner_lock"))
                    .collect::<Result<_>>()?;
                if locks.is_empty() {
                    return Ok(0);
                }
                // One connection for try-lock and unlock: advisory locks belong to a session.
                let mut c = p.acquire().await?;
                let mut n = 0;
                for k in locks {
                    let free: bool = sqlx::Row::try_get(
                        &sqlx::query("SELECT pg_try_advisory_lock($1) AS free")
                            .bind(k)
                            .fetch_one(&mut *c)
                            .await?,
                        "free",
                    )?;
                    if !free {
                        continue;
                    }
                    let r = sqlx::query(fail)
                        .bind(message)
                        .bind(pull_hint)
                        .bind(at)
                        .bind(k)
                        .bind(&me.id)
                        .execute(&mut *c)
                        .await;
                    sqlx::query("SELECT pg_advisory_unlock($1)")
                        .bind(k)
                        .execute(&mut *c)
                        .await?;
                    n += r?.rows_affected();
                }
                Ok(n)
            }
        }
    }

    /// Forgets ended jobs beyond the newest `keep` jobs.
    pub async fn prune_jobs(&self, keep: i64) -> Result<u64> {
        let sql = "DELETE FROM jobs WHERE status NOT IN ('queued', 'running') AND id NOT IN \
            (SELECT id FROM jobs ORDER BY created_at DESC, id DESC LIMIT $1)";
        on_pool!(self, |p| Ok(sqlx::query(sql)
            .bind(keep)
            .execute(p)
            .await?
            .rows_affected()))
    }
}
