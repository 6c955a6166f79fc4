-- Memory (pgvector), the usage ledger and the audit trail. Re-runnable: every statement
-- is IF NOT EXISTS or replaces what it defines.

-- Memories --------------------------------------------------------------------------------
-- Vectors of different embedding models have different dimensions, so `embedding` is an
-- untyped `vector` and every row says which model made it. Searches always filter by
-- `embedding_model`, so vectors of two models never meet in one search. Each model gets
-- its own HNSW index: a partial expression index that casts to that model's fixed
-- dimension (an HNSW index needs one). The offline default's index is created here;
-- activities/memory.py creates the index of any other model the first time it stores a
-- vector of it (models above 2,000 dimensions, the HNSW limit in pgvector 0.6, are
-- searched exactly).
--
-- `memory_partition` is the isolation unit: workspace/scope/agent/scope_key, where agent is
-- `*` for workspace scope (shared by the workspace's agents). Workspace and agent names are
-- DNS labels, so the key cannot be forged by a scope key that contains slashes.
CREATE TABLE IF NOT EXISTS memories (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace        text        NOT NULL,
    agent            text        NOT NULL,
    scope            text        NOT NULL CHECK (scope IN ('channel', 'agent', 'workspace')),
    scope_key        text        NOT NULL,
    memory_partition text        GENERATED ALWAYS AS (
        workspace || '/' || scope || '/'
        || CASE WHEN scope = 'workspace' THEN '*' ELSE agent END
        || '/' || scope_key
    ) STORED,
    content          text        NOT NULL,
    embedding_model  text        NOT NULL,
    embedding_dims   integer     NOT NULL,
    embedding        vector      NOT NULL CHECK (vector_dims(embedding) = embedding_dims),
    source_task_id   text        NOT NULL,
    source_step      integer     NOT NULL,
    idempotency_key  text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL
);

-- A retried write (same workflow id + step) finds its row instead of adding one.
CREATE UNIQUE INDEX IF NOT EXISTS memories_idempotency ON memories (idempotency_key);
-- Exact search of small scopes, and the per-scope row count that picks the strategy.
CREATE INDEX IF NOT EXISTS memories_partition
    ON memories (embedding_model, memory_partition, expires_at);
-- Retention purge and operator listing.
CREATE INDEX IF NOT EXISTS memories_expires_at ON memories (expires_at);
CREATE INDEX IF NOT EXISTS memories_hnsw_offline_hashing_256
    ON memories USING hnsw ((embedding::vector(256)) vector_cosine_ops)
    WHERE embedding_model = 'offline/hashing-256';

-- Isolation in the database itself: recall and search run as `openloop_memory_reader`
-- (SET LOCAL ROLE inside their transaction) with `openloop.memory_partition` set to the
-- caller's partition. Row-level security then hides every other partition's rows, even from
-- a query that forgets its WHERE clause; with no partition set, the role sees nothing. The
-- role can only SELECT. Writes, listing and purging run as the table owner.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'openloop_memory_reader') THEN
        CREATE ROLE openloop_memory_reader NOLOGIN;
    END IF;
END
$$;
GRANT openloop_memory_reader TO CURRENT_USER;
GRANT SELECT ON memories TO openloop_memory_reader;
ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS memories_one_partition ON memories;
CREATE POLICY memories_one_partition ON memories FOR SELECT TO openloop_memory_reader
    USING (memory_partition = current_setting('openloop.memory_partition', true));

-- Usage ledger: one row per model call --------------------------------------------------
-- (task_id, key) is the idempotency key: a retried activity writes its row once.
CREATE TABLE IF NOT EXISTS usage_ledger (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id           text        NOT NULL,
    key               text        NOT NULL,
    step              integer     NOT NULL,
    workspace         text        NOT NULL,
    agent             text        NOT NULL,
    channel           text        NOT NULL,
    surface           text        NOT NULL,
    task_kind         text        NOT NULL DEFAULT '',
    model             text        NOT NULL,
    prompt_tokens     integer     NOT NULL DEFAULT 0,
    completion_tokens integer     NOT NULL DEFAULT 0,
    cost_usd          double precision NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (task_id, key)
);
CREATE INDEX IF NOT EXISTS usage_ledger_created_at ON usage_ledger (created_at);
CREATE INDEX IF NOT EXISTS usage_ledger_agent ON usage_ledger (agent, created_at);
CREATE INDEX IF NOT EXISTS usage_ledger_channel ON usage_ledger (channel, created_at);

-- Audit trail: tool calls and approval decisions ----------------------------------------
-- Arguments are never stored whole: a sha256 of their canonical JSON (to match a decision
-- to the exact action) and a redacted, truncated preview for people.
CREATE TABLE IF NOT EXISTS audit_log (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id           text        NOT NULL,
    key               text        NOT NULL,
    step              integer     NOT NULL,
    workspace         text        NOT NULL,
    agent             text        NOT NULL,
    channel           text        NOT NULL,
    kind              text        NOT NULL,
    actor             text        NOT NULL,
    approver          text,
    tool              text,
    arguments_sha256  text,
    arguments_preview jsonb,
    outcome           text        NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (task_id, key)
);
CREATE INDEX IF NOT EXISTS audit_log_created_at ON audit_log (created_at);
CREATE INDEX IF NOT EXISTS audit_log_agent ON audit_log (agent, created_at);
