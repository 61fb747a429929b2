-- Model jobs (pull, import, convert, quantize), so the job list survives a restart and every
-- replica sharing the database sees every replica's jobs.
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,               -- pull | import | convert | quantize
    status TEXT NOT NULL,             -- queued | running | succeeded | failed | cancelled
    phase TEXT NOT NULL,
    unit TEXT NOT NULL,               -- what progress counts: bytes | tensors
    done INTEGER NOT NULL,
    total INTEGER NOT NULL,           -- 0 while unknown
    percent REAL NOT NULL,
    request TEXT NOT NULL,            -- the request that started it (source, target ...), JSON
    detail TEXT NOT NULL,             -- live facts of the work (a digest ...), JSON object
    result TEXT,                      -- what it made, JSON, once succeeded
    error TEXT,
    created_at REAL NOT NULL,         -- Unix seconds with fractions
    started_at REAL,
    finished_at REAL,
    owner TEXT NOT NULL,              -- the server process that runs it
    owner_lock INTEGER NOT NULL,      -- that process's liveness lock (Postgres advisory lock key)
    cancel_requested INTEGER NOT NULL DEFAULT 0, -- 1: another replica asked the owner to stop it
    updated_at REAL NOT NULL
);
CREATE INDEX jobs_created ON jobs (created_at);
CREATE INDEX jobs_status ON jobs (status);
