-- Linear agent sessions and the task each one runs now: a prompt in a session steers that
-- task, or starts the session's next one when it has ended (surfaces.linear.dispatch).
CREATE TABLE IF NOT EXISTS linear_sessions (
    session_id  text        PRIMARY KEY,
    agent       text        NOT NULL,
    task_id     text        NOT NULL,
    issue_id    text        NOT NULL,
    team        text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
