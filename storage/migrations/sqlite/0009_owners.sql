-- Owners (issue 33): every chat-UI session and every model job records the principal that
-- made it (an API key's id, `env` for WEFT_ADMIN_KEY, `open` for open mode's one local
-- principal). Another principal is answered as if the thing did not exist.
--
-- Rows from before this step had no owner; they become open mode's: in open mode nothing
-- changes for the one local user, and with keys no key reaches them any more (before, every
-- key did).
ALTER TABLE chat_sessions ADD COLUMN owner TEXT NOT NULL DEFAULT 'open';
CREATE INDEX chat_sessions_owner ON chat_sessions (owner);

-- `jobs.owner` already names the server process running a job; who asked for it is `principal`.
ALTER TABLE jobs ADD COLUMN principal TEXT NOT NULL DEFAULT 'open';
CREATE INDEX jobs_principal ON jobs (principal, created_at);
