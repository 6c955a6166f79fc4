-- Slack messages a model call streamed its answer into, one row per stream, written as soon
-- as Slack created the message. A retried model call finds its earlier attempts' streams here
-- and removes them before streaming again, so a thread never shows two answers; a call whose
-- answer was already stored hands the message on to the closing reply, which edits it.
CREATE TABLE IF NOT EXISTS answer_streams (
    task_id    text        NOT NULL,
    step       integer     NOT NULL,
    channel    text        NOT NULL,
    ts         text        NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, step, ts)
);
