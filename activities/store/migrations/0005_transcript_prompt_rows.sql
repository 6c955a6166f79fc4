-- The model activity reads a task's system prompt and latest summary on every call: index
-- them, so those lookups stay single index probes however long the transcript grows.
CREATE INDEX IF NOT EXISTS transcript_system_summary
    ON transcript (task_id, seq) WHERE role IN ('system', 'summary');
