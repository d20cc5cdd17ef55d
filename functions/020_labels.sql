-- Labels (design.md invariant 4). Every generation, of every thread, carries the union of its
-- thread's category and the labels of everything it received: rows from other threads, reads
-- (read_thread, report_read_generations) and copies. The set is stored with the generation and
-- only grows (ember.generation_labels is the lookup); a row is stamped with its generation's set
-- as it is inserted. ember.generation_sources keeps, as an audit trail, which threads each
-- generation received content from. Main and the steward (ember.is_label_carrier) are simply
-- where most of it gathers; what sets them apart is elsewhere (flow, copies, visibility).

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
CREATE OR REPLACE FUNCTION ember.latest_generation(p_tenant text, p_thread text)
RETURNS uuid
LANGUAGE sql STABLE
AS $$
    SELECT g.id FROM ember.generations AS g
    WHERE g.tenant_id = p_tenant AND g.thread_id = p_thread
    ORDER BY g.ended_at IS NULL DESC, g.ordinal DESC
    LIMIT 1
$$;

-- A generation's labels: the set stored with it (db/migrations/0006_generation_labels.sql). It
-- starts as the thread's category and only grows, widened in the transaction that brings the
-- content (ember.widen_generation_labels): so this is a lookup, the same for every caller, and
-- the answer is transitive through any chain of threads, because what a row, a read or a copy
-- brings is itself the sender's stored set. The alternative, recomputing the union from the
-- history on every question, was what let labels fall out at a thread that was not a carrier.
CREATE OR REPLACE FUNCTION ember.generation_labels(p_generation uuid)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_labels text[];
BEGIN
    SELECT g.labels INTO v_labels FROM ember.generations AS g WHERE g.id = p_generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown generation "%"', p_generation USING ERRCODE = 'EM020';
    END IF;
    RETURN v_labels;
END;
$$;

-- Widen a generation's label set by p_labels; returns the set afterwards. Writes only when
-- something is new, so the common case (nothing new) is one indexed read. Callers hold the
-- generation's thread lock, or are inside the insert of one of its rows (which holds it).
CREATE OR REPLACE FUNCTION ember.widen_generation_labels(p_generation uuid, p_labels text[])
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_labels text[];
BEGIN
    SELECT g.labels INTO v_labels FROM ember.generations AS g WHERE g.id = p_generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown generation "%"', p_generation USING ERRCODE = 'EM020';
    END IF;
    IF p_labels IS NULL OR v_labels @> array_remove(p_labels, NULL) THEN
        RETURN v_labels;
    END IF;
    UPDATE ember.generations SET labels = ember.label_set(labels || p_labels)
    WHERE id = p_generation
    RETURNING labels INTO v_labels;
    RETURN v_labels;
END;
$$;

-- The generations table holds its own invariants: a new generation starts with its thread's
-- category (whatever inserted it); its labels never narrow; its thread, ordinal and start never
-- change; it ends once; it is never deleted (its rows, and the labels it carries, would go with it).
CREATE OR REPLACE FUNCTION ember.generations_rules()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF tg_op = 'INSERT' THEN
        new.labels := ember.label_set(
            coalesce(new.labels, '{}') || (
                SELECT t.category FROM ember.threads AS t
                WHERE t.tenant_id = new.tenant_id AND t.id = new.thread_id
            )
        );
        RETURN new;
    END IF;
    IF tg_op IN ('DELETE', 'TRUNCATE') THEN
        RAISE EXCEPTION 'generations are never deleted: % refused', tg_op
            USING ERRCODE = 'EM017', HINT = 'end a generation with start_generation()';
    END IF;
    IF NOT new.labels @> old.labels THEN
        RAISE EXCEPTION 'generation %: labels % cannot narrow (to %)', old.id, old.labels, new.labels
            USING ERRCODE = 'EM021',
                  HINT = 'labels only grow within a generation; start a new generation for a clean context';
    END IF;
    new.labels := ember.label_set(new.labels);
    IF new.id IS DISTINCT FROM old.id OR new.thread_id IS DISTINCT FROM old.thread_id
       OR new.ordinal IS DISTINCT FROM old.ordinal OR new.started_at IS DISTINCT FROM old.started_at
       OR (old.ended_at IS NOT NULL AND new.ended_at IS DISTINCT FROM old.ended_at) THEN
        RAISE EXCEPTION 'generation %: its thread, ordinal, start and end (once set) never change', old.id
            USING ERRCODE = 'EM017';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER generations_rules
BEFORE INSERT OR UPDATE OR DELETE ON ember.generations
FOR EACH ROW EXECUTE FUNCTION ember.generations_rules();

CREATE OR REPLACE TRIGGER generations_no_truncate
BEFORE TRUNCATE ON ember.generations
FOR EACH STATEMENT EXECUTE FUNCTION ember.generations_rules();

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
-- category plus everything that generation has received. A plain user message in main adds
-- nothing, a progress row from a category thread adds that category.
CREATE OR REPLACE FUNCTION ember.thread_call_labels(p_tenant text, p_thread text)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_generation uuid;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_thread) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    v_generation := ember.latest_generation(p_tenant, p_thread);
    IF v_generation IS NULL THEN
        RETURN ember.label_set(ARRAY(
            SELECT category FROM ember.threads WHERE tenant_id = p_tenant AND id = p_thread
        ));
    END IF;
    RETURN ember.generation_labels(v_generation);
END;
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.thread_call_labels(p_thread text)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT ember.thread_call_labels(ember.sole_tenant(), p_thread)
$$;

-- Record that a generation received content from the given threads (the audit trail). Idempotent: the first arrival of
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
        tenant_id, thread_id, generation_id, source_thread, via, message_id, source_generation
    )
    SELECT g.tenant_id, g.thread_id, g.id, src, p_via, p_message, p_source_generation
    FROM ember.generations AS g
    CROSS JOIN unnest(p_sources) AS src
    WHERE g.id = p_generation AND src IS NOT NULL AND src <> g.thread_id
    ON CONFLICT DO NOTHING
$$;

-- A generation reports the generations it read: its labels grow by theirs (which already hold
-- everything those generations received, so the rule is transitive), and their content threads
-- are recorded as its sources. Any thread may read (read_thread reports for every automated
-- viewer); the steward reports what its backlog pages held. Returns the labels afterwards.
CREATE OR REPLACE FUNCTION ember.report_read_generations(
    p_generation uuid, p_read_generations uuid[]
)
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_tenant text;
    v_thread text;
    v_unknown uuid[];
    v_read uuid;
BEGIN
    SELECT g.tenant_id, g.thread_id INTO v_tenant, v_thread FROM ember.generations AS g WHERE g.id = p_generation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown generation "%"', p_generation USING ERRCODE = 'EM020';
    END IF;
    IF p_read_generations IS NULL THEN
        RAISE EXCEPTION 'generation "%": the list of generations read must not be null', p_generation
            USING ERRCODE = 'EM012';
    END IF;
    v_unknown := ARRAY(
        SELECT r FROM unnest(p_read_generations) AS r
        WHERE r IS NULL OR NOT EXISTS (SELECT 1 FROM ember.generations WHERE tenant_id = v_tenant AND id = r)
    );
    IF cardinality(v_unknown) > 0 THEN
        RAISE EXCEPTION 'generation "%": unknown generations read: %', p_generation, v_unknown
            USING ERRCODE = 'EM020';
    END IF;
    -- Serialize with appends to the reader (append_message locks the same row), so that a row
    -- appended after this report commits is stamped with what it adds.
    PERFORM ember.lock_thread(v_tenant, v_thread);
    FOREACH v_read IN ARRAY p_read_generations LOOP
        PERFORM ember.add_generation_sources(
            p_generation, ember.generation_content_threads(v_read), 'read', NULL, v_read
        );
    END LOOP;
    RETURN ember.widen_generation_labels(p_generation, ARRAY(
        SELECT unnest(g.labels) FROM ember.generations AS g
        WHERE g.tenant_id = v_tenant AND g.id = ANY(p_read_generations)
    ));
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

-- A thread's category may be set once, before it has rows, and never changed or removed: every
-- label set that holds it would otherwise hold a label the thread no longer has, or miss one.
-- Set late (on a thread without rows), it widens the thread's own generations at once; nothing of
-- the thread has been sent or read yet, so no other generation needs it.
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
    -- copied, forwarded or read under the old labels; restamping every row and generation that
    -- ever saw it is not something a trigger can do honestly. So a category is decided up front.
    IF old.category IS NULL AND new.category IS NOT NULL
       AND EXISTS (SELECT 1 FROM ember.messages AS m WHERE m.tenant_id = old.tenant_id AND m.thread_id = old.id) THEN
        RAISE EXCEPTION 'thread "%" already has rows: it cannot be categorised "%" afterwards',
            old.id, new.category
            USING ERRCODE = 'EM021',
                  HINT = 'set the category when the thread is created, or start a new thread';
    END IF;
    IF old.category IS NULL AND new.category IS NOT NULL THEN
        UPDATE ember.generations SET labels = ember.label_set(labels || new.category)
        WHERE tenant_id = old.tenant_id AND thread_id = old.id;
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_category_fixed
BEFORE UPDATE OF category ON ember.threads
FOR EACH ROW EXECUTE FUNCTION ember.threads_category_fixed();

-- What a row with from_thread brings: the sending thread's latest generation's content threads,
-- recorded as sources (the audit trail; the labels travel through the stored sets).
CREATE OR REPLACE FUNCTION ember.message_source_threads(p_tenant text, p_from text)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN ember.latest_generation(p_tenant, p_from) IS NULL THEN ARRAY[p_from]
        ELSE ember.generation_content_threads(ember.latest_generation(p_tenant, p_from))
    END
$$;

-- The row-label stamp, at insert time: the labels of the row's generation once the row itself
-- is counted. A row from another thread (a progress report, a message from main, a copy of a
-- forwarded row) first widens its generation by the sender's current labels, in the same
-- statement, so the row and every later row of the generation carry them. The caller's value is
-- ignored: the database decides. One lookup for a plain row (the write path stays cheap).
CREATE OR REPLACE FUNCTION ember.messages_stamp_labels()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id THEN
        new.categories := ember.widen_generation_labels(
            new.generation_id, ember.thread_call_labels(new.tenant_id, new.from_thread)
        );
    ELSE
        new.categories := ember.generation_labels(new.generation_id);
    END IF;
    RETURN new;
END;
$$;

-- A bulk writer (append_messages, import) whose statement brings no row from another thread
-- stamps every row with ember.generation_labels() itself, once per generation, and marks the
-- insert 'labelled' (messages_arrival_guard, 991_input_guards.sql): no row of that statement can
-- widen a generation, so the labels are the same for every row of a generation, and a call per
-- row would only repeat the lookup. Any row from another thread is stamped here all the same.
CREATE OR REPLACE TRIGGER messages_stamp_labels
BEFORE INSERT ON ember.messages
FOR EACH ROW
WHEN (
    current_setting('ember.inserting_message', TRUE) IS DISTINCT FROM 'labelled'
    OR (new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id)
)
EXECUTE FUNCTION ember.messages_stamp_labels();

-- After the row exists (the source row points at it), record where it came from.
CREATE OR REPLACE FUNCTION ember.messages_record_source()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.add_generation_sources(
        new.generation_id, ember.message_source_threads(new.tenant_id, new.from_thread), 'message', new.id
    );
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER messages_record_source
AFTER INSERT ON ember.messages
FOR EACH ROW
WHEN (new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id)
EXECUTE FUNCTION ember.messages_record_source();
