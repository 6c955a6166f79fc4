-- Dashboard sessions, kept server-side so that signing out ends a session at once on every
-- replica of the surfaces server, and a copied cookie stops working with it. The cookie holds
-- only a signed random id; a row is keyed by that id's SHA-256, so the table never holds an id
-- that could be sent as a cookie. `source` says how the person signed in: `link` (a one-time
-- link; its role is the one the link gave) or `oidc` (the role is derived again on every
-- request). Rows are deleted a day after they expire.
CREATE TABLE IF NOT EXISTS dashboard_sessions (
    id_sha256  text        PRIMARY KEY,
    user_id    text        NOT NULL,
    also       text[]      NOT NULL DEFAULT '{}',
    role       text        NOT NULL,
    source     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX IF NOT EXISTS dashboard_sessions_user ON dashboard_sessions (user_id);
CREATE INDEX IF NOT EXISTS dashboard_sessions_expiry ON dashboard_sessions (expires_at);
