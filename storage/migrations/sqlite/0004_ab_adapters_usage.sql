-- A/B tests, their votes, LoRA adapter metadata, per-key tokens per minute and tenant usage.
ALTER TABLE api_keys ADD COLUMN tokens_per_minute INTEGER;
-- Tokens (prompt + completion) the tenant's keys used since its usage was last reset.
ALTER TABLE tenants ADD COLUMN tokens_used INTEGER NOT NULL DEFAULT 0;

CREATE TABLE ab_tests (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    model_a TEXT NOT NULL,
    model_b TEXT NOT NULL,
    share_b INTEGER NOT NULL,       -- B's share of requests in basis points (0..=10000)
    routed INTEGER NOT NULL DEFAULT 0, -- requests routed so far; the split is a function of it
    created_at INTEGER NOT NULL
);

CREATE TABLE ab_votes (
    id TEXT PRIMARY KEY,
    test_id TEXT NOT NULL REFERENCES ab_tests(id) ON DELETE CASCADE,
    variant TEXT NOT NULL,          -- 'a' or 'b'
    request_id TEXT,
    comment TEXT,
    actor TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX ab_votes_test ON ab_votes(test_id);

CREATE TABLE adapters (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    base_model TEXT NOT NULL,
    path TEXT NOT NULL,             -- absolute path of the GGUF inside the models store
    scale REAL NOT NULL,
    created_at INTEGER NOT NULL
);
