-- What every model call of a task shares (agent, workspace, channel, surface, model routes,
-- tool names, budget caps, where folded tool calls act): written once per run by the
-- workflow's first local activity and read by the model activity, so it is not repeated in
-- every model call's input (history). One row per task; a later run replaces it.
CREATE TABLE IF NOT EXISTS task_constants (
    task_id    text        PRIMARY KEY,
    constants  jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
