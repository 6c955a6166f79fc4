-- A workspace diff's changed files, whole: what a draft pull request commits through the
-- Git data API on a worker that does not hold the workspace (it may be gone by the time a
-- person approves). Keyed like workspace_diffs, by the diff's SHA-256.
CREATE TABLE IF NOT EXISTS workspace_changes (
    diff_sha256 text        PRIMARY KEY,
    base_commit text        NOT NULL,
    files       jsonb       NOT NULL,  -- [{path, mode, content_b64 | null (deleted)}]
    recorded_at timestamptz NOT NULL DEFAULT now()
);
