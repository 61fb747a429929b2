-- Chat-UI sessions and their conversations, so a session survives a restart and any replica
-- can continue it.
CREATE TABLE chat_sessions (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE chat_messages (
    session_id TEXT NOT NULL REFERENCES chat_sessions(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,   -- the message's place in the conversation, from 0
    message TEXT NOT NULL,  -- one OpenAI-style chat message as JSON
    PRIMARY KEY (session_id, seq)
);
