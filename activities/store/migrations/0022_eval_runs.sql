-- `openloop eval run`: each run of a dataset (one row per agent version or model it ran),
-- each case's result with its checks, and what a case gives its task: the answers it scripts
-- for `scripted/eval` and the fixtures the eval surface's tools read (activities/tools/eval_tools.py).
CREATE TABLE IF NOT EXISTS eval_runs (
    id          text        PRIMARY KEY,
    dataset     text        NOT NULL,
    agent       text        NOT NULL,
    version     integer     NOT NULL,
    model       text,
    label       text        NOT NULL,           -- "helper v2" or "helper v2 on openai/gpt-4o"
    compared_to text        REFERENCES eval_runs (id) ON DELETE SET NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    cases       integer     NOT NULL DEFAULT 0, -- case x repeat
    passed      integer     NOT NULL DEFAULT 0,
    cost_usd    double precision NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS eval_runs_started ON eval_runs (started_at DESC);

CREATE TABLE IF NOT EXISTS eval_results (
    run_id     text        NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    case_id    text        NOT NULL,
    repeat     integer     NOT NULL,
    task_id    text        NOT NULL,
    status     text        NOT NULL,
    passed     boolean     NOT NULL,
    checks     jsonb       NOT NULL,            -- [{name, passed, detail}]
    reply      text        NOT NULL DEFAULT '',
    steps      integer     NOT NULL DEFAULT 0,
    tokens     integer     NOT NULL DEFAULT 0,
    cost_usd   double precision NOT NULL DEFAULT 0,
    latency_ms integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, case_id, repeat)
);

CREATE TABLE IF NOT EXISTS eval_scripts (
    task_id    text        PRIMARY KEY,
    answers    jsonb       NOT NULL,            -- [{text, tool_calls: [{tool, args}]}]
    fixtures   jsonb       NOT NULL DEFAULT '{}', -- {thread: ["who: text"], issues: [{number, title, ...}]}
    created_at timestamptz NOT NULL DEFAULT now()
);
