-- Label carriers (design.md invariant 4): what each carrier generation has read.
-- The rules that use this table (labels, stamping, routing, flow, visibility) are in
-- functions/020_labels.sql .. functions/025_visibility.sql.

-- Lets generation_sources name its carrier thread and its generation in one foreign key, so
-- the database itself refuses a source row whose thread and generation disagree.
ALTER TABLE ember.generations ADD CONSTRAINT generations_id_thread UNIQUE (id, thread_id);

-- One row per (carrier generation, source thread): the first time the generation read it.
-- Append-only: a trigger refuses UPDATE, DELETE and TRUNCATE, because a carrier's labels
-- only grow within a generation. Labels join the source's category when asked rather than
-- copying it here: a thread's category may be set once but never changed or removed (a
-- trigger), so the join can only grow, and a thread categorised late still labels every
-- generation that read it earlier.
CREATE TABLE ember.generation_sources (
    -- The carrier thread (distribution key, design.md section 7) and its generation.
    thread_id text NOT NULL,
    generation_id uuid NOT NULL,
    source_thread text NOT NULL REFERENCES ember.threads (id),
    -- How the content arrived: a row with from_thread, a generation the steward reported
    -- it read, or a copy of rows (fork, clone, quote).
    via text NOT NULL CHECK (via IN ('message', 'read', 'copy')),
    -- The first evidence of the arrival: the row that brought it, or the generation read.
    message_id bigint REFERENCES ember.messages (id),
    source_generation uuid REFERENCES ember.generations (id),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (thread_id, generation_id, source_thread),
    FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id),
    CONSTRAINT generation_sources_evidence CHECK (
        (via = 'message') = (message_id IS NOT NULL)
        AND (via <> 'read' OR source_generation IS NOT NULL)
    )
);

CREATE INDEX generation_sources_generation ON ember.generation_sources (generation_id);

COMMENT ON TABLE ember.generation_sources IS
'What each label-carrier generation has read; append-only. Labels = categories of these sources
plus the carrier''s own category (ember.generation_labels).';
