-- State the write path keeps so that housekeeping and readiness visit only threads with work
-- (issue 13). tick(), shadow_ready() and claim_shadow_run() used to take max(seq) and
-- max(created_at) over every message of every thread each minute; these tables hold those
-- figures, kept up to date in the transaction that changes them (functions/080_write_state.sql).

-- One row per generation that has rows: its highest seq and latest row time, and how far shadow
-- has read it (ember.shadow_read_position). A generation with last_seq > read_seq has rows shadow
-- has not read; the partial index makes that set cheap to list however long the history is.
CREATE TABLE ember.generation_progress (
    generation_id uuid PRIMARY KEY REFERENCES ember.generations (id),
    thread_id text NOT NULL,
    last_seq bigint NOT NULL,
    last_message_at timestamptz NOT NULL,
    read_seq bigint NOT NULL DEFAULT 0,
    -- Stored rather than written as last_seq > read_seq in each query: the planner keeps
    -- statistics on a column, not on a comparison of two, and with the default one-in-three
    -- guess for the comparison it scanned every thread to find the twenty with work.
    unread boolean GENERATED ALWAYS AS (last_seq > read_seq) STORED
);

CREATE INDEX generation_progress_thread ON ember.generation_progress (thread_id);
CREATE INDEX generation_progress_unread ON ember.generation_progress (thread_id)
WHERE unread;

-- Threads whose open generation changed (or that were created) since tick() last recorded the
-- generation it saw: tick() remembers the current generation of these only, instead of upserting
-- every thread's state each minute.
CREATE TABLE ember.generation_changes (
    thread_id text PRIMARY KEY REFERENCES ember.threads (id)
);

-- Existing data: the same figures computed once from the rows.
INSERT INTO ember.generation_progress (generation_id, thread_id, last_seq, last_message_at, read_seq)
SELECT
    m.generation_id,
    min(m.thread_id) AS thread_id,
    max(m.seq) AS last_seq,
    max(m.created_at) AS last_message_at,
    greatest(
        coalesce((
            SELECT c.baseline_seq FROM ember.shadow_cursors AS c
            WHERE c.generation_id = m.generation_id
        ), 0),
        coalesce((
            SELECT max(r.through_seq) FROM ember.shadow_runs AS r
            WHERE r.generation_id = m.generation_id AND r.status = 'completed'
        ), 0)
    ) AS read_seq
FROM ember.messages AS m
GROUP BY m.generation_id;

INSERT INTO ember.generation_changes (thread_id)
SELECT t.id FROM ember.threads AS t;
