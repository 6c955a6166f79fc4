-- One-time dashboard sign-in links (`openloop up`, `openloop dashboard link`): a link's nonce is
-- written when it is first used, so it signs in once across restarts and replicas of the
-- surfaces server. Rows whose link has expired are deleted as new ones come in.
CREATE TABLE IF NOT EXISTS dashboard_used_links (
    nonce      text        PRIMARY KEY,
    user_id    text        NOT NULL,
    used_at    timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
