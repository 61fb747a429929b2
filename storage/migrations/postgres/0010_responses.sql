-- Responses stored by `POST /v1/responses` (`store: true`), for `GET /v1/responses/{id}`, its
-- input items and `previous_response_id`: each with its owner (the key id, `env` or `open`),
-- so only that principal reads, continues or deletes it, and it survives a restart.
CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at BIGINT NOT NULL,   -- Unix seconds (the response's created_at)
    stored_at BIGINT NOT NULL,    -- Unix microseconds: the order the bound drops them in
    bytes BIGINT NOT NULL,        -- length of response + input, for the per-owner bound
    response TEXT NOT NULL,       -- the response object as JSON
    input TEXT NOT NULL           -- the input items it answered, as a JSON array
);

CREATE INDEX responses_owner ON responses (owner, stored_at);
