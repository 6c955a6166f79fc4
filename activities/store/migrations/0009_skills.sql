-- Skills (a SKILL.md and its resources), versioned like agents: a new version only when
-- the content changes. A task keeps the versions it started with (name, version, sha256).
CREATE TABLE IF NOT EXISTS skills (
    name          text        NOT NULL,
    version       integer     NOT NULL,
    sha256        text        NOT NULL,
    ref           text        NOT NULL,
    description   text        NOT NULL,
    body          text        NOT NULL,
    resources     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    allowed_tools text[]      NOT NULL DEFAULT '{}',
    applied_by    text        NOT NULL DEFAULT '',
    applied_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);
