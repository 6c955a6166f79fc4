-- Core tables: versioned agents and the append-only task transcript.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS agents (
    workspace   text        NOT NULL,
    name        text        NOT NULL,
    version     integer     NOT NULL,
    spec        jsonb       NOT NULL,
    spec_sha256 text        NOT NULL,
    source      text        NOT NULL DEFAULT '',
    applied_by  text        NOT NULL DEFAULT '',
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, name, version)
);

-- One row per message; (task_id, seq) is the idempotency key of every append.
CREATE TABLE IF NOT EXISTS transcript (
    task_id    text        NOT NULL,
    seq        integer     NOT NULL,
    role       text        NOT NULL,
    message    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
);

-- Tool outputs too large to ride in workflow history; referenced by id.
CREATE TABLE IF NOT EXISTS tool_outputs (
    ref        text        PRIMARY KEY,
    task_id    text        NOT NULL,
    content    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
