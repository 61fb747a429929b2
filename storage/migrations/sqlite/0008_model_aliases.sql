-- Model names clients made (/api/create, /api/copy, aliases, names given to pulled files) and
-- overrides set on a model file's own name: what the registry kept in weft-models.json, here
-- so that replicas on one database share them.
CREATE TABLE model_aliases (
    name TEXT PRIMARY KEY,
    target_kind TEXT NOT NULL CHECK (target_kind IN ('file', 'alias')),
    target TEXT NOT NULL,           -- a GGUF path (file) or another name (alias)
    overrides TEXT NOT NULL,        -- JSON object: system, template, parameters
    origin TEXT NOT NULL CHECK (origin IN ('created', 'command_line', 'directory')),
    updated_at INTEGER NOT NULL
);
