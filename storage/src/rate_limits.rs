//! Per-key limits (requests per minute, tokens per minute) shared by every server on one
//! database, so R replicas on one Postgres allow a key its limit once, not R times.
//!
//! **Algorithm: a token bucket kept as one time per key and limit** (the "generic cell rate
//! algorithm" form of a token bucket). A limit of N per minute is a bucket of N units refilled
//! continuously at N / 60 a second; instead of a level and a last-refill time, the row holds
//! `full_at`, the moment the bucket will be full again (Unix microseconds). At time `now`
//! the bucket is short of `backlog = max(0, full_at − now)` microseconds of refill, i.e. it
//! holds `N × (1 − backlog / 1 min)` units. Using `n` units costs `n × 1 min / N` of refill:
//! `full_at = max(full_at, now) + cost`.
//!
//! - **requests per minute**: a request needs one unit, so it is let in when
//!   `backlog + cost(1) ≤ 1 min`, and its unit is taken in the same statement;
//! - **tokens per minute**: a request is let in while the bucket holds anything
//!   (`backlog < 1 min`); the tokens a generation used are taken out when it ends, which may
//!   put the bucket in debt (`backlog > 1 min`), and later requests wait for the refill.
//!
//! A refused request is told to wait the whole seconds (rounded up, at least 1) until the
//! backlog is low enough, by when the same check lets it in.
//!
//! Each check-and-take is one `INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING` on the key's
//! row, which the database runs atomically (the row is locked for the update), so concurrent
//! requests on any number of replicas are counted exactly. **Error bound**: none for requests
//! per minute beyond rounding each cost up to the microsecond (which only ever refuses
//! sooner) — unlike a fixed one-minute window (up to 2 N in a minute straddling two windows)
//! or a sliding estimate from two windows (exact only if the previous window's requests were
//! spread evenly). Tokens per minute can be overshot by design, as in memory: the requests
//! let in at once while the bucket held anything all spend theirs, and later ones wait for
//! that whole debt. Time is the database's clock (`clock_timestamp()`), one clock for every
//! replica, so skew between the servers' clocks does not matter. The table holds one row per
//! key and limit, updated in place: nothing to prune (a row whose `full_at` has passed is a
//! full bucket, the same as no row).
//!
//! The same arithmetic ([`backlog`], [`fits`], [`after`], [`cost_us`]) serves a server's
//! in-memory buckets (the server keeps those on SQLite, where one process owns the database).

use crate::{Result, Storage};

/// One minute in microseconds: the refill time of a whole bucket.
pub const MINUTE_US: i64 = 60_000_000;

/// The most refill a bucket may owe (100 days): a key with a tiny limit and huge generations
/// waits at most this long, and the times never overflow 64 bits.
pub const MAX_BACKLOG_US: i64 = 100 * 24 * 60 * MINUTE_US;

/// What a tokens-per-minute check needs: the bucket holds anything (more than 0 units).
pub const ANY_US: i64 = 1;

/// Which of a key's limits a row counts.
#[derive(Clone, Copy)]
enum RateKind {
    Requests,
    Tokens,
}

impl RateKind {
    fn as_str(self) -> &'static str {
        match self {
            RateKind::Requests => "rpm",
            RateKind::Tokens => "tpm",
        }
    }
}

/// `Ok` when let in, else `Err(seconds)` to wait (the `Retry-After`).
pub type Verdict = std::result::Result<(), u32>;

/// The refill time that `n` units of a limit of `per_minute` stand for, rounded up (so many
/// small uses never add up to less than their total), at most [`MAX_BACKLOG_US`].
pub fn cost_us(per_minute: u32, n: u64) -> i64 {
    let c = (u128::from(n) * MINUTE_US as u128).div_ceil(u128::from(per_minute.max(1)));
    i64::try_from(c).unwrap_or(i64::MAX).min(MAX_BACKLOG_US)
}

/// How much refill a bucket whose `full_at` is given is short of at `now` (0: full).
pub fn backlog(full_at: i64, now: i64) -> i64 {
    full_at.saturating_sub(now).max(0)
}

/// Whether a request needing `need` of refill fits a bucket short of `backlog`: `Err` with
/// the whole seconds until it does.
pub fn fits(backlog: i64, need: i64) -> Verdict {
    let over = backlog.saturating_add(need) - MINUTE_US;
    if over <= 0 {
        return Ok(());
    }
    let secs = (over as u64).div_ceil(1_000_000);
    Err(u32::try_from(secs).unwrap_or(u32::MAX).max(1))
}

/// The bucket's `full_at` after `cost` (at most [`MAX_BACKLOG_US`]) is taken at `now`: its
/// backlog grows by `cost`, up to [`MAX_BACKLOG_US`].
pub fn after(full_at: i64, now: i64, cost: i64) -> i64 {
    full_at.max(now).min(now + (MAX_BACKLOG_US - cost)) + cost
}

/// The statements, per backend: the same text but for the clock and the names of the
/// two-argument maximum and minimum. `$1` is the time (null: the database's clock), `$2` the
/// key, `$3` the kind, `$4` the cost, `$5` the largest backlog that still lets it in, `$6`
/// the largest backlog the cost may be added to (`MAX_BACKLOG_US - cost`).
macro_rules! statements {
    ($greatest:literal, $least:literal, $clock:literal) => {
        Statements {
            // The proposed row's full_at (`excluded.full_at`) is `now + cost`, so the clock is
            // read once; the update is the arithmetic of `after`, the condition that of `fits`.
            take: concat!(
                "INSERT INTO rate_limits (key_id, kind, full_at) VALUES ($2, $3, COALESCE($1, ",
                $clock,
                ") + $4) ON CONFLICT (key_id, kind) DO UPDATE SET full_at = ",
                $least,
                "(",
                $greatest,
                "(rate_limits.full_at, excluded.full_at - $4), excluded.full_at - $4 + ",
                "$6) + $4 WHERE rate_limits.full_at - (excluded.full_at - $4) <= $5 ",
                "RETURNING full_at"
            ),
            backlog: concat!(
                "SELECT full_at - COALESCE($1, ",
                $clock,
                ") AS backlog FROM rate_limits WHERE key_id = $2 AND kind = $3"
            ),
        }
    };
}

struct Statements {
    take: &'static str,
    backlog: &'static str,
}

const SQLITE: Statements = statements!(
    "MAX",
    "MIN",
    "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
);

const POSTGRES: Statements = statements!(
    "GREATEST",
    "LEAST",
    "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT"
);

impl Storage {
    /// Takes one request from `key`'s bucket of `rpm` requests per minute, or says how long
    /// to wait. `now`: Unix microseconds, or `None` for the database's clock (what servers
    /// use; a given time is for tests).
    pub async fn take_request(&self, key: &str, rpm: u32, now: Option<i64>) -> Result<Verdict> {
        let cost = cost_us(rpm, 1);
        self.take(key, RateKind::Requests, cost, MINUTE_US - cost, now)
            .await
    }

    /// Whether `key` may start a request under its tokens-per-minute limit: its bucket holds
    /// anything (the limit itself only sets how fast spending fills the backlog).
    pub async fn check_tokens(&self, key: &str, now: Option<i64>) -> Result<Verdict> {
        let b = self.backlog(key, RateKind::Tokens, now).await?;
        Ok(fits(b, ANY_US))
    }

    /// Takes the `tokens` a generation used out of `key`'s bucket of `tpm` tokens per minute
    /// (always: this may leave it in debt).
    pub async fn spend_tokens(
        &self,
        key: &str,
        tpm: u32,
        tokens: u64,
        now: Option<i64>,
    ) -> Result<()> {
        // Room for any backlog: never refused, so the verdict is always `Ok`.
        let _always_in = self
            .take(key, RateKind::Tokens, cost_us(tpm, tokens), i64::MAX, now)
            .await?;
        Ok(())
    }

    /// Adds `cost` to the bucket if its backlog is at most `room`, in one statement;
    /// otherwise reads the backlog to say how long to wait.
    async fn take(
        &self,
        key: &str,
        kind: RateKind,
        cost: i64,
        room: i64,
        now: Option<i64>,
    ) -> Result<Verdict> {
        let sql = match &*self.db {
            crate::Db::Sqlite(_) => SQLITE.take,
            crate::Db::Postgres(_) => POSTGRES.take,
        };
        let taken = on_pool!(self, |p| sqlx::query(sql)
            .bind(now)
            .bind(key)
            .bind(kind.as_str())
            .bind(cost)
            .bind(room)
            .bind(MAX_BACKLOG_US - cost)
            .fetch_optional(p)
            .await?
            .is_some());
        if taken {
            return Ok(Ok(()));
        }
        // Refused. The backlog is read again to say how long; if the bucket refilled in
        // between, the caller is told the shortest wait rather than let in unrecorded.
        let b = self.backlog(key, kind, now).await?;
        Ok(Err(fits(b, MINUTE_US - room).err().unwrap_or(1)))
    }

    /// How much refill `key`'s bucket of `kind` is short of (0: full, or no row).
    async fn backlog(&self, key: &str, kind: RateKind, now: Option<i64>) -> Result<i64> {
        let sql = match &*self.db {
            crate::Db::Sqlite(_) => SQLITE.backlog,
            crate::Db::Postgres(_) => POSTGRES.backlog,
        };
        let b: Option<i64> = on_pool!(self, |p| sqlx::query_scalar(sql)
            .bind(now)
            .bind(key)
            .bind(kind.as_str())
            .fetch_optional(p)
            .await?);
        Ok(b.unwrap_or(0).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_round_up_and_stay_bounded() {
        assert_eq!(cost_us(60, 1), 1_000_000);
        assert_eq!(cost_us(7, 1), 8_571_429);
        assert_eq!(cost_us(600, 650), 65_000_000);
        assert_eq!(cost_us(0, 1), MINUTE_US, "a zero limit counts as 1");
        assert_eq!(cost_us(1, u64::MAX), MAX_BACKLOG_US);
    }

    #[test]
    fn requests_fit_until_the_bucket_is_empty_and_wait_for_one_unit() {
        // 3 per minute: each request costs 20 s of refill.
        let cost = cost_us(3, 1);
        let mut full_at = 0;
        for _ in 0..3 {
            assert_eq!(fits(backlog(full_at, 0), cost), Ok(()));
            full_at = after(full_at, 0, cost);
        }
        assert_eq!(fits(backlog(full_at, 0), cost), Err(20));
        // 19.5 s later half a second is still missing (rounded up to 1); at 20 s it fits.
        assert_eq!(fits(backlog(full_at, 19_500_000), cost), Err(1));
        assert_eq!(fits(backlog(full_at, 20_000_000), cost), Ok(()));
        // A long idle bucket is full, not more than full.
        let later = 3600 * 1_000_000;
        assert_eq!(backlog(full_at, later), 0);
        assert_eq!(after(full_at, later, cost), later + cost);
    }

    #[test]
    fn tokens_go_into_debt_and_wait_for_it_to_clear() {
        // 600 per minute: 650 tokens are 65 s of refill, 5 s beyond a whole bucket.
        let full_at = after(0, 0, cost_us(600, 650));
        assert_eq!(fits(backlog(full_at, 0), ANY_US), Err(6));
        assert_eq!(fits(backlog(full_at, 4_999_999), ANY_US), Err(1));
        assert_eq!(fits(backlog(full_at, 5_000_000), ANY_US), Err(1));
        assert_eq!(fits(backlog(full_at, 5_000_001), ANY_US), Ok(()));
        // Debt is capped, so the times never overflow.
        let huge = after(i64::MAX / 2, 0, MAX_BACKLOG_US);
        assert_eq!(huge, MAX_BACKLOG_US);
        assert_eq!(after(huge, 0, cost_us(1, 1)), MAX_BACKLOG_US);
    }
}
