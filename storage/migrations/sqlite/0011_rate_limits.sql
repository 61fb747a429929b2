-- Per-key limits shared by every server on the database (issue 33): requests per minute
-- ('rpm') and tokens per minute ('tpm'), one row per key and limit, holding the time at which
-- the key's bucket is full again (Unix microseconds by the database's clock; the algorithm is
-- in storage/src/rate_limits.rs). A row is updated in place, never added per window, so the
-- table holds at most two rows per key and needs no pruning.
--
-- Transient: left out of backups (dump.rs), and no foreign key to api_keys, so a restore that
-- replaces the keys never trips over it (a restored key's stale row only lasts its backlog).
CREATE TABLE rate_limits (
    key_id TEXT NOT NULL,
    kind TEXT NOT NULL,            -- 'rpm' or 'tpm'
    full_at INTEGER NOT NULL,      -- when the bucket is full again, Unix microseconds
    PRIMARY KEY (key_id, kind)
);
