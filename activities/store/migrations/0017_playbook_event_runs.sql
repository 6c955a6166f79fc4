-- The playbook runs each outside event started, however its playbooks chain through emitted
-- events (`origin`: the event that started the chain, or the run that began it). A run started
-- by an emitted event is counted here before it starts, and refused once its origin has
-- started as many runs as one event may (workflows.playbook_calls.MAX_RUNS_PER_EVENT).
CREATE TABLE IF NOT EXISTS playbook_event_runs (
    origin     text        NOT NULL,
    run_id     text        NOT NULL,
    counted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (origin, run_id)
);
