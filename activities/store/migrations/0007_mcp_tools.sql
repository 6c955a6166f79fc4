-- The tools an MCP server listed for a task at its start: the model activity offers the
-- model exactly these schemas (the workflow keeps the same specs in its state).
CREATE TABLE IF NOT EXISTS task_tools (
    task_id    text        NOT NULL,
    name       text        NOT NULL,
    spec       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, name)
);

-- The result of each MCP tool call, by its idempotency key: a retried activity whose call
-- already answered returns this instead of calling the server again.
CREATE TABLE IF NOT EXISTS mcp_call_results (
    idempotency_key text        PRIMARY KEY,
    task_id         text        NOT NULL,
    ok              boolean     NOT NULL,
    output          text        NOT NULL,
    output_ref      text,
    error_kind      text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
