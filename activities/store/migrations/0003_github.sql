-- GitHub surface: remembered webhook deliveries and create-issue claims.

-- One row per delivery that started (or signalled) a task. GitHub keeps the delivery GUID on
-- redelivery, so a redelivery weeks later, after Temporal forgot the workflow id, still
-- starts nothing. `started_at` stays null until the task was started, so a delivery whose
-- start failed midway is started on redelivery (the start itself is idempotent).
CREATE TABLE IF NOT EXISTS github_deliveries (
    delivery_id   text        PRIMARY KEY,
    event         text        NOT NULL,
    received_at   timestamptz NOT NULL DEFAULT now(),
    task_id       text,
    repo          text,
    thread        text,
    reaction_path text,
    started_at    timestamptz
);
CREATE INDEX IF NOT EXISTS github_deliveries_thread
    ON github_deliveries (repo, thread, received_at DESC);

-- GitHub's create-issue API has no idempotency key: the key is claimed here before the
-- first attempt, and a retry that finds a claim without an issue number looks for the
-- hidden marker the first attempt put in the body before creating anything.
CREATE TABLE IF NOT EXISTS github_issue_claims (
    idempotency_key text        PRIMARY KEY,
    repo            text        NOT NULL,
    issue_number    integer,
    claimed_at      timestamptz NOT NULL DEFAULT now()
);

-- The same for comments (tool comments and surface replies): target is "issue:12" or
-- "commit:<sha>"; comment_id is set once the comment is known to exist.
CREATE TABLE IF NOT EXISTS github_comment_claims (
    idempotency_key text        PRIMARY KEY,
    repo            text        NOT NULL,
    target          text        NOT NULL,
    comment_id      bigint,
    claimed_at      timestamptz NOT NULL DEFAULT now()
);
