-- Labels (design.md invariant 4). A label carrier (ember.is_label_carrier: main and the
-- steward) carries the union of the categories of everything its generation has read; the
-- record of what it read is ember.generation_sources, which only grows. Every other thread's
-- rows carry that thread's own category.

-- A sorted, de-duplicated label array without NULLs: the one shape every label array has.
CREATE OR REPLACE FUNCTION ember.label_set(p_labels text[])
RETURNS text[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(array_agg(DISTINCT l ORDER BY l), '{}')
    FROM unnest(p_labels) AS l
    WHERE l IS NOT NULL
$$;

-- The thread's open generation, else its latest one; NULL for an unknown thread. Unlike
-- ember.current_generation it never opens a generation: reading labels writes nothing.
CREATE OR REPLACE FUNCTION ember.latest_generation(p_thread text)
RETURNS uuid
LANGUAGE sql STABLE
AS $$
    SELECT g.id FROM ember.generations AS g
    WHERE g.thread_id = p_thread
    ORDER BY g.ended_at IS NULL DESC, g.ordinal DESC
    LIMIT 1
$$;

-- The union of the categories of the generation's own thread and of its source threads. A
-- carrier's sources are recorded in generation_sources. Any other thread records none, but a row
-- it received from another thread (from_thread: a message from main, a progress report) is stamped
-- with what that row brought, and its generation carries that too: otherwise main's labels, having
-- passed the flow check into a tagged thread, would be read from there by shadow's light model or
-- the steward as if the thread held only its own category. Only those rows are scanned, and only
-- for non-carriers, whose stamps are otherwise just their thread's category.
CREATE OR REPLACE FUNCTION ember.generation_labels(p_generation uuid)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_thread text;
BEGIN
    SELECT g.thread_id INTO v_thread FROM ember.generations AS g WHERE g.id = p_generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown generation "%"', p_generation USING ERRCODE = 'EM020';
    END IF;
    RETURN ember.label_set(ARRAY(
        SELECT t.category FROM ember.threads AS t WHERE t.id = v_thread
        UNION ALL
        SELECT t.category
        FROM ember.generation_sources AS s
        JOIN ember.threads AS t ON t.id = s.source_thread
        WHERE s.generation_id = p_generation
        UNION ALL
        SELECT unnest(m.categories)
        FROM ember.messages AS m
        WHERE m.generation_id = p_generation
            AND m.from_thread IS NOT NULL
            AND m.from_thread <> m.thread_id
            AND NOT ember.is_label_carrier(v_thread)
    ));
END;
$$;

-- The threads whose content a generation holds: its own thread and every source it read.
-- What a carrier passes on carries all of them, so reading a carrier's generation (or
-- receiving a row from it) records all of them: labels are conserved across carriers.
CREATE OR REPLACE FUNCTION ember.generation_content_threads(p_generation uuid)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT ARRAY(
        SELECT g.thread_id FROM ember.generations AS g WHERE g.id = p_generation
        UNION
        SELECT s.source_thread FROM ember.generation_sources AS s WHERE s.generation_id = p_generation
    )
$$;

-- The labels a call from this thread carries now: those of its latest generation, i.e. its own
-- category plus, for a carrier, everything that generation has read. The shadow pipeline
-- routes its calls with this: a plain user message in main adds nothing, a progress row from a
-- category thread adds that category.
CREATE OR REPLACE FUNCTION ember.thread_call_labels(p_thread text)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_generation uuid;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = p_thread) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    v_generation := ember.latest_generation(p_thread);
    IF v_generation IS NULL THEN
        RETURN ember.label_set(ARRAY(SELECT category FROM ember.threads WHERE id = p_thread));
    END IF;
    RETURN ember.generation_labels(v_generation);
END;
$$;

-- Record that a carrier generation read the given threads. Idempotent: the first arrival of
-- each source is kept, later ones add nothing. Callers validate; this only writes.
CREATE OR REPLACE FUNCTION ember.add_generation_sources(
    p_generation uuid,
    p_sources text[],
    p_via text,
    p_message bigint DEFAULT NULL,
    p_source_generation uuid DEFAULT NULL
)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO ember.generation_sources (
        thread_id, generation_id, source_thread, via, message_id, source_generation
    )
    SELECT g.thread_id, g.id, src, p_via, p_message, p_source_generation
    FROM ember.generations AS g
    CROSS JOIN unnest(p_sources) AS src
    WHERE g.id = p_generation AND src IS NOT NULL AND src <> g.thread_id
    ON CONFLICT DO NOTHING
$$;

-- The steward reports the generations it read: its generation then carries their labels,
-- including, for a generation of main, everything main had read in it. Returns the
-- generation's labels afterwards.
CREATE OR REPLACE FUNCTION ember.report_read_generations(
    p_generation uuid, p_read_generations uuid[]
)
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_thread text;
    v_unknown uuid[];
    v_read uuid;
BEGIN
    SELECT g.thread_id INTO v_thread FROM ember.generations AS g WHERE g.id = p_generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown generation "%"', p_generation USING ERRCODE = 'EM020';
    END IF;
    IF NOT ember.is_label_carrier(v_thread) THEN
        RAISE EXCEPTION 'generation "%" belongs to thread "%", which is not a label carrier',
            p_generation, v_thread
            USING ERRCODE = 'EM012',
                  HINT = 'only carriers record what they read; other rows carry their thread''s category';
    END IF;
    IF p_read_generations IS NULL THEN
        RAISE EXCEPTION 'generation "%": the list of generations read must not be null', p_generation
            USING ERRCODE = 'EM012';
    END IF;
    v_unknown := ARRAY(
        SELECT r FROM unnest(p_read_generations) AS r
        WHERE r IS NULL OR NOT EXISTS (SELECT 1 FROM ember.generations WHERE id = r)
    );
    IF cardinality(v_unknown) > 0 THEN
        RAISE EXCEPTION 'generation "%": unknown generations read: %', p_generation, v_unknown
            USING ERRCODE = 'EM020';
    END IF;
    -- Serialize with appends to the carrier (append_message locks the same row), so that a row
    -- appended after this report commits is stamped with what it adds.
    PERFORM ember.lock_thread(v_thread);
    FOREACH v_read IN ARRAY p_read_generations LOOP
        PERFORM ember.add_generation_sources(
            p_generation, ember.generation_content_threads(v_read), 'read', NULL, v_read
        );
    END LOOP;
    RETURN ember.generation_labels(p_generation);
END;
$$;

-- Labels never shrink: generation sources are append-only. A refused change raises instead
-- of being silently skipped, so a caller that tries learns it at once.
CREATE OR REPLACE FUNCTION ember.generation_sources_append_only()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'generation sources are append-only: % refused', tg_op
        USING ERRCODE = 'EM021',
              HINT = 'labels only grow within a generation; start a new generation for a clean context';
END;
$$;

CREATE OR REPLACE TRIGGER generation_sources_no_update_delete
BEFORE UPDATE OR DELETE ON ember.generation_sources
FOR EACH ROW EXECUTE FUNCTION ember.generation_sources_append_only();

CREATE OR REPLACE TRIGGER generation_sources_no_truncate
BEFORE TRUNCATE ON ember.generation_sources
FOR EACH STATEMENT EXECUTE FUNCTION ember.generation_sources_append_only();

-- A thread's category may be set once, before it has rows, and never changed or removed: labels
-- are joined from it (ember.generation_labels), so changing it would take a label away from
-- every generation and route that had it.
CREATE OR REPLACE FUNCTION ember.threads_category_fixed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF old.category IS NOT NULL AND new.category IS DISTINCT FROM old.category THEN
        RAISE EXCEPTION 'thread "%": category "%" cannot be changed or removed (to %)',
            old.id, old.category, coalesce('"' || new.category || '"', 'none')
            USING ERRCODE = 'EM021',
                  HINT = 'labels never shrink; put other content in a new thread';
    END IF;
    -- Categorising a thread that already has rows would label content after it was stamped and
    -- copied, forwarded or read under the old labels; restamping every row and carrier that ever
    -- saw it is not something a trigger can do honestly. So a category is decided up front.
    IF old.category IS NULL AND new.category IS NOT NULL
       AND EXISTS (SELECT 1 FROM ember.messages AS m WHERE m.thread_id = old.id) THEN
        RAISE EXCEPTION 'thread "%" already has rows: it cannot be categorised "%" afterwards',
            old.id, new.category
            USING ERRCODE = 'EM021',
                  HINT = 'set the category when the thread is created, or start a new thread';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_category_fixed
BEFORE UPDATE OF category ON ember.threads
FOR EACH ROW EXECUTE FUNCTION ember.threads_category_fixed();

-- What a row with from_thread brings into a carrier: the sending thread's latest generation's
-- content threads (the sender alone, unless the sender is itself a carrier).
CREATE OR REPLACE FUNCTION ember.message_source_threads(p_from text)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN ember.latest_generation(p_from) IS NULL THEN ARRAY[p_from]
        ELSE ember.generation_content_threads(ember.latest_generation(p_from))
    END
$$;

-- The row-label stamp, at insert time. Every row carries what it itself brings when it has
-- from_thread (a progress row from a category thread, a message from a labelled main): the
-- categories of the sender's content threads. A carrier row carries its generation's labels
-- besides (the source is recorded by messages_record_source just after); any other row its
-- thread's category. The caller's value is ignored: the database decides.
CREATE OR REPLACE FUNCTION ember.messages_stamp_labels()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_brought text[] := '{}';
BEGIN
    IF new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id THEN
        v_brought := ARRAY(
            SELECT t.category FROM ember.threads AS t
            WHERE t.id = ANY(ember.message_source_threads(new.from_thread))
        );
    END IF;
    IF ember.is_label_carrier(new.thread_id) THEN
        new.categories := ember.label_set(ember.generation_labels(new.generation_id) || v_brought);
    ELSE
        new.categories := ember.label_set(
            ARRAY(SELECT t.category FROM ember.threads AS t WHERE t.id = new.thread_id) || v_brought
        );
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER messages_stamp_labels
BEFORE INSERT ON ember.messages
FOR EACH ROW EXECUTE FUNCTION ember.messages_stamp_labels();

-- After the row exists (the source row points at it), record what it brought.
CREATE OR REPLACE FUNCTION ember.messages_record_source()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id
       AND ember.is_label_carrier(new.thread_id) THEN
        PERFORM ember.add_generation_sources(
            new.generation_id, ember.message_source_threads(new.from_thread), 'message', new.id
        );
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER messages_record_source
AFTER INSERT ON ember.messages
FOR EACH ROW EXECUTE FUNCTION ember.messages_record_source();

-- A stamped row keeps its labels: no update may change them.
CREATE OR REPLACE FUNCTION ember.messages_labels_fixed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.categories IS DISTINCT FROM old.categories THEN
        RAISE EXCEPTION 'message %: its labels % are stamped at insert and cannot change (to %)',
            old.id, old.categories, new.categories
            USING ERRCODE = 'EM021';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER messages_labels_fixed
BEFORE UPDATE OF categories ON ember.messages
FOR EACH ROW EXECUTE FUNCTION ember.messages_labels_fixed();
