-- Deliveries of the surfaces that share one inbox (Discord's Gateway events, Zoom's and
-- Linear's webhooks): written before the ack, dispatched right after, kept until the start or
-- signal succeeded. (surface, event_id) is the key, so a redelivery finds its row and adds
-- nothing. Slack keeps its own table (0004), which came first.
CREATE TABLE IF NOT EXISTS surface_inbox (
    surface         text        NOT NULL,
    event_id        text        NOT NULL,
    payload         jsonb       NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    handled_at      timestamptz,
    outcome         text,
    PRIMARY KEY (surface, event_id)
);
CREATE INDEX IF NOT EXISTS surface_inbox_due
    ON surface_inbox (surface, next_attempt_at) WHERE handled_at IS NULL;
