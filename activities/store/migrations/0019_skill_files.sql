-- A skill's resources as exact bytes, one row per file: skills ship fonts, PDFs and archives,
-- which text in jsonb could neither hold (a NUL byte) nor keep byte-exact. Text resources
-- stored before move over unchanged (their UTF-8 bytes), then the jsonb column goes.
CREATE TABLE IF NOT EXISTS skill_files (
    name     text    NOT NULL,
    version  integer NOT NULL,
    path     text    NOT NULL,
    content  bytea   NOT NULL,
    PRIMARY KEY (name, version, path),
    FOREIGN KEY (name, version) REFERENCES skills (name, version) ON DELETE CASCADE
);

-- Re-runnable, as every migration: the move happens only while the old column is there.
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'skills' AND column_name = 'resources'
    ) THEN
        EXECUTE $move$
            INSERT INTO skill_files (name, version, path, content)
            SELECT skills.name, skills.version, file.key, convert_to(file.value, 'UTF8')
            FROM skills, jsonb_each_text(skills.resources) AS file
            ON CONFLICT DO NOTHING
        $move$;
        ALTER TABLE skills DROP COLUMN resources;
    END IF;
END
$$;
