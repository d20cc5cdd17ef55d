-- Files imported whole (functions/083_import.sql): by the SHA-256 of their bytes, what each held
-- and a fingerprint of its threads as the import left them, so that importing the same file
-- again is answered without reading it while those threads are unchanged.
CREATE TABLE ember.import_files (
    digest text PRIMARY KEY CHECK (digest ~ '^[0-9a-f]{64}$'),
    -- The threads the file's records name, sorted.
    threads text[] NOT NULL,
    -- What the file holds: {"threads": n, "generations": n, "messages": n}.
    held jsonb NOT NULL,
    fingerprint text NOT NULL,
    imported_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
