-- The names of Slack channels agents are bound to, kept by channel id. A binding is stored by
-- id, so it follows a renamed channel; the name is for people (App Home, audit lines) and is
-- updated when Slack sends `channel_rename`.
CREATE TABLE IF NOT EXISTS slack_channel_names (
    channel_id    text        PRIMARY KEY,
    name          text        NOT NULL,
    previous_name text,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
