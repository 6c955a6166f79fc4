-- The MCP tool specs a task started with, stored once per distinct set: tasks whose servers
-- listed the same tools point to one row instead of each writing its own copy of every spec
-- (a task of 20 servers holds ~120). `task_tools` stays readable for tasks started before.
CREATE TABLE IF NOT EXISTS tool_spec_sets (
    sha256     text        PRIMARY KEY,
    specs      jsonb       NOT NULL,  -- {tool name: spec}
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS task_tool_sets (
    task_id    text        NOT NULL,
    sha256     text        NOT NULL REFERENCES tool_spec_sets (sha256),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, sha256)
);
