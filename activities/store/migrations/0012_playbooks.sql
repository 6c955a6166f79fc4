-- Playbooks: each applied version of a compiled playbook (a new one only when its content hash
-- changed; a playbook whose files are gone is retired, not deleted, so old runs still read),
-- the registry's events as of the last apply (surfaces match webhooks against them), and one
-- row per run with its steps, outputs and costs.
CREATE TABLE IF NOT EXISTS playbooks (
    name         text        NOT NULL,
    version      integer     NOT NULL,
    content_hash text        NOT NULL,
    spec         jsonb       NOT NULL,
    trigger_kind text        NOT NULL,
    trigger_event text,
    applied_by   text        NOT NULL DEFAULT '',
    applied_at   timestamptz NOT NULL DEFAULT now(),
    retired_at   timestamptz,
    PRIMARY KEY (name, version)
);

CREATE TABLE IF NOT EXISTS playbook_events (
    name       text        PRIMARY KEY,
    spec       jsonb       NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS playbook_runs (
    run_id      text             PRIMARY KEY,
    playbook    text             NOT NULL,
    version     integer          NOT NULL,
    event_name  text             NOT NULL,
    run_key     text             NOT NULL,
    event       jsonb            NOT NULL DEFAULT '{}',
    status      text             NOT NULL DEFAULT 'RUNNING',
    reason      text             NOT NULL DEFAULT '',
    steps       jsonb            NOT NULL DEFAULT '[]',
    cost_usd    double precision NOT NULL DEFAULT 0,
    depth       integer          NOT NULL DEFAULT 0,
    seq         integer          NOT NULL DEFAULT 0,
    started_at  timestamptz      NOT NULL DEFAULT now(),
    updated_at  timestamptz      NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS playbook_runs_by_playbook ON playbook_runs (playbook, started_at DESC);
