-- Moderation rules: a keyword or regex checked against requests (input) and/or generated text
-- (output); `action` is block or flag. The server validates and compiles patterns.
CREATE TABLE moderation_rules (
    id TEXT PRIMARY KEY,
    pattern TEXT NOT NULL,
    kind TEXT NOT NULL,           -- keyword | regex
    action TEXT NOT NULL,         -- block | flag
    applies_to TEXT NOT NULL,     -- input | output | both
    created_at INTEGER NOT NULL
);
