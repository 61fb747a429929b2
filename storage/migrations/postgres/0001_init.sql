-- Times are Unix seconds (BIGINT) so both backends store and compare them the same way.
CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    models TEXT,            -- JSON array of allowed model names; NULL = every model
    token_quota BIGINT,    -- tokens per period; NULL = unlimited
    created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,  -- hex SHA-256 of the key; the key itself is never stored
    prefix TEXT NOT NULL,       -- the key's first characters, to recognise it in lists
    tenant TEXT REFERENCES tenants(id),
    rate_limit_rpm BIGINT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    last_used_at BIGINT
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,  -- argon2id PHC string
    role TEXT NOT NULL,
    tenant TEXT REFERENCES tenants(id),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,          -- JSON
    updated_at BIGINT NOT NULL
);

CREATE TABLE audit (
    id BIGSERIAL PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,          -- key id, or "open" / "env" when no stored key was used
    method TEXT NOT NULL,
    route TEXT NOT NULL,
    status BIGINT NOT NULL,
    remote TEXT,
    details TEXT                  -- JSON; never a key, hash or password
);
CREATE INDEX audit_at ON audit(at);
