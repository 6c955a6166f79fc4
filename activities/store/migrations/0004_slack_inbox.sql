-- Slack events are written here before the ack and started (or signalled) right after by the
-- inbox dispatcher, so the ack never waits on Temporal and an event Slack was told we have is
-- never lost: a row stays unhandled until its start or signal succeeded. Slack's event_id is
-- the key, so a redelivery finds its row and adds nothing.
CREATE TABLE IF NOT EXISTS slack_inbox (
    event_id        text        PRIMARY KEY,
    payload         jsonb       NOT NULL,
    retry_num       integer     NOT NULL DEFAULT 0,
    received_at     timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    -- While a dispatcher works on a row this is its lease; after a failure, the retry time.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    handled_at      timestamptz,
    outcome         text
);
CREATE INDEX IF NOT EXISTS slack_inbox_due
    ON slack_inbox (next_attempt_at) WHERE handled_at IS NULL;
