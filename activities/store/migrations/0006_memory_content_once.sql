-- One memory per content per scope: saving a decision that is already in the scope returns
-- the stored memory instead of a second row. `content_key` is the sha256 (hex) of the content
-- case-folded, whitespace collapsed and trimmed, computed by `activities.store.memory`; the
-- unique index makes two saves racing each other leave one row.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS content_key text;

-- Rows saved before this migration: the oldest row of each duplicate group gets its key (SQL's
-- lower() stands in for Python's casefold(); they agree on ASCII), later duplicates keep NULL
-- (rows are never dropped by a migration) and are left to retention.
UPDATE memories AS m
SET content_key = k.content_key
FROM (
    SELECT id, content_key,
           row_number() OVER (PARTITION BY memory_partition, content_key ORDER BY created_at, id) AS n
    FROM (
        SELECT id, memory_partition, created_at,
               encode(sha256(convert_to(
                   lower(btrim(regexp_replace(content, '\s+', ' ', 'g'))), 'UTF8')), 'hex') AS content_key
        FROM memories
        WHERE content_key IS NULL
    ) AS computed
) AS k
WHERE m.id = k.id
  AND k.n = 1
  AND NOT EXISTS (
      SELECT 1 FROM memories AS o
      WHERE o.memory_partition = m.memory_partition AND o.content_key = k.content_key
  );

CREATE UNIQUE INDEX IF NOT EXISTS memories_content_once ON memories (memory_partition, content_key);
