-- Repair loops: one row per loop, one report per finished round, each command's output
-- (its last few MB, referenced from reports and never put in workflow history) and the
-- workspace's diff from its base commit after each round, stored once per content hash.
CREATE TABLE IF NOT EXISTS loops (
    loop_id     text        PRIMARY KEY,
    name        text        NOT NULL,
    spec        jsonb       NOT NULL,
    status      text        NOT NULL DEFAULT 'RUNNING',
    reason      text        NOT NULL DEFAULT '',
    next_action text        NOT NULL DEFAULT '',
    started_by  text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);

CREATE TABLE IF NOT EXISTS loop_rounds (
    loop_id     text        NOT NULL REFERENCES loops (loop_id) ON DELETE CASCADE,
    round       integer     NOT NULL,
    report      jsonb       NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (loop_id, round)
);

CREATE TABLE IF NOT EXISTS loop_outputs (
    output_id   bigserial   PRIMARY KEY,
    loop_id     text        NOT NULL,
    round       integer     NOT NULL,
    step        text        NOT NULL,
    attempt     text        NOT NULL,  -- the activity attempt: a retried command keeps both
    output      bytea       NOT NULL,
    truncated   boolean     NOT NULL DEFAULT false,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (loop_id, round, step, attempt)
);
CREATE INDEX IF NOT EXISTS loop_outputs_by_loop ON loop_outputs (loop_id, round, step);

CREATE TABLE IF NOT EXISTS workspace_diffs (
    sha256      text        PRIMARY KEY,
    diff        bytea       NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
