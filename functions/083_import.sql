-- Import (docs/import-format.md). `ember import` checks the header, COPYs every other line into
-- pg_temp.import_lines (lineno, line) and calls import_staged(): every line is checked
-- set-based and each rejected one reported with its number and reason; then, unless a line was
-- rejected and p_partial is false, the accepted records are written: threads by create_thread,
-- generations by one INSERT, messages (checked by staged_rows_check, as append_messages checks
-- its rows) by one INSERT ... SELECT in file order under the threads' row locks, so the row
-- triggers run as for append_message and seq follows the file. Identity: thread id; thread and
-- ordinal; thread, generation and position. A second import of a file writes nothing.

CREATE OR REPLACE FUNCTION ember.import_staged(p_partial boolean DEFAULT FALSE)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    r record;
    v_threads integer := 0;
    v_generations integer := 0;
    v_messages integer := 0;
    v_present integer := 0;
    v_rejected jsonb;
BEGIN
    DROP TABLE IF EXISTS pg_temp.import_records, pg_temp.import_threads, pg_temp.import_generations;

    -- 1. Every line: JSON, an object, a known type, well-formed fields.
    CREATE TEMP TABLE import_records ON COMMIT DROP AS
    SELECT l.lineno, j.doc, j.doc ->> 'type' AS type, CASE
            WHEN j.doc IS NULL THEN 'not JSON'
            WHEN jsonb_typeof(j.doc) <> 'object' THEN 'not a JSON object but ' || jsonb_typeof(j.doc)
            WHEN jsonb_typeof(j.doc -> 'type') IS DISTINCT FROM 'string'
                OR j.doc ->> 'type' NOT IN ('thread', 'generation', 'message')
                THEN 'unknown record type ' || coalesce((j.doc -> 'type')::text, '(none)')
            WHEN j.doc ->> 'type' = 'message' AND ember.import_message_ok(j.doc) THEN NULL
            ELSE ember.import_record_error(j.doc ->> 'type', j.doc)
        END AS error
    FROM pg_temp.import_lines AS l
    CROSS JOIN LATERAL (
        -- jsonb, parsed once per line (OFFSET 0 keeps the planner from copying the parse into
        -- every use of doc); json would re-parse the line for every field read. Raw blocks
        -- travel as a JSON string, whose value jsonb keeps exactly.
        SELECT ember.text_to_jsonb_or_null(l.line) AS doc
        OFFSET 0
    ) AS j;
    -- Temporary tables have no statistics until analyzed; a guess may nest loops.
    CREATE UNIQUE INDEX ON import_records (lineno);
    ANALYZE import_records;

    -- 2. Threads. A thread already stored with the same kind is present; with another kind, or
    -- a second record of the same id, the line is rejected. Field values are checked here by
    -- the rules create_thread applies, so that a rejection names the line.
    CREATE TEMP TABLE import_threads ON COMMIT DROP AS
    SELECT
        x.lineno, x.doc ->> 'id' AS id, x.doc ->> 'kind' AS kind, x.doc ->> 'title' AS title,
        x.doc ->> 'category' AS category, coalesce(x.doc ->> 'seal_tier', 'open') AS seal_tier,
        x.doc ->> 'model' AS model, coalesce(x.doc ->> 'status', 'active') AS status,
        (x.doc ->> 'created_at')::timestamptz AS created_at,
        t.kind AS stored_kind, t.id IS NOT NULL AS stored
    FROM import_records AS x
    LEFT JOIN ember.threads AS t ON t.id = x.doc ->> 'id'
    WHERE x.type = 'thread' AND x.error IS NULL;
    CREATE INDEX ON import_threads (id);
    ANALYZE import_threads;

    UPDATE import_records AS x SET error = c.error
    FROM (
        SELECT it.lineno, CASE
            WHEN it.id IN ('human', 'memory-steward') THEN format('thread id "%s" is reserved', it.id)
            WHEN NOT ember.is_safe_thread_id(it.id) THEN format('thread id %s is not an identifier', to_json(it.id))
            WHEN first_line.lineno < it.lineno
                THEN format('thread "%s" is already defined on line %s', it.id, first_line.lineno)
            WHEN it.stored AND it.stored_kind <> it.kind
                THEN format('thread "%s" is stored with kind %s, not %s', it.id, it.stored_kind, it.kind)
            WHEN it.stored THEN NULL
            WHEN it.kind NOT IN ('main', 'side', 'task')
                THEN format('thread "%s": unknown kind "%s" (main, side, task)', it.id, it.kind)
            WHEN it.seal_tier NOT IN ('open', 'isolated')
                THEN format('thread "%s": unknown seal tier "%s"', it.id, it.seal_tier)
            WHEN it.status NOT IN ('active', 'ended', 'archived')
                THEN format('thread "%s": unknown status "%s"', it.id, it.status)
            WHEN it.category IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.categories AS k WHERE k.name = it.category)
                THEN format('thread "%s": unknown category "%s"', it.id, it.category)
            WHEN it.model IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.models AS md WHERE md.id = it.model)
                THEN format('thread "%s": unknown model "%s"', it.id, it.model)
            WHEN it.kind = 'main' AND (
                    EXISTS (SELECT 1 FROM ember.threads AS m WHERE m.kind = 'main')
                    OR EXISTS (SELECT 1 FROM import_threads AS o WHERE o.kind = 'main' AND o.lineno < it.lineno))
                THEN format('thread "%s": a main thread already exists', it.id)
        END AS error
        FROM import_threads AS it
        CROSS JOIN LATERAL (
            SELECT min(o.lineno) AS lineno FROM import_threads AS o WHERE o.id = it.id
        ) AS first_line
    ) AS c
    WHERE x.lineno = c.lineno AND c.error IS NOT NULL;
    DELETE FROM import_threads AS it
    WHERE EXISTS (SELECT 1 FROM import_records AS x WHERE x.lineno = it.lineno AND x.error IS NOT NULL);

    -- 3. Generations: of a known thread (stored, or accepted above), numbered on from what is
    -- stored, only the last one open. A stored generation with the same start is present.
    CREATE TEMP TABLE import_generations ON COMMIT DROP AS
    SELECT
        x.lineno, x.doc ->> 'thread' AS thread_id, (x.doc ->> 'ordinal')::integer AS ordinal,
        (x.doc ->> 'started_at')::timestamptz AS started_at,
        (x.doc ->> 'ended_at')::timestamptz AS ended_at,
        g.id AS stored_id, g.started_at AS stored_started_at, g.ended_at AS stored_ended_at,
        NULL::uuid AS generation_id
    FROM import_records AS x
    LEFT JOIN ember.generations AS g
        ON g.thread_id = x.doc ->> 'thread' AND g.ordinal = (x.doc ->> 'ordinal')::integer
    WHERE x.type = 'generation' AND x.error IS NULL;
    CREATE INDEX ON import_generations (thread_id, ordinal);
    ANALYZE import_generations;

    UPDATE import_records AS x SET error = c.error
    FROM (
        SELECT ig.lineno, CASE
            WHEN NOT EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = ig.thread_id)
                AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = ig.thread_id)
                THEN format('unknown thread "%s"', ig.thread_id)
            WHEN EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = ig.thread_id AND it.lineno > ig.lineno)
                THEN format('generation %s of thread "%s" comes before the thread''s record', ig.ordinal, ig.thread_id)
            WHEN ig.ordinal = 1 AND ig.stored_id IS NULL AND ig.started_at IS DISTINCT FROM
                (SELECT it.created_at FROM import_threads AS it WHERE it.id = ig.thread_id AND NOT it.stored)
                THEN format('generation 1 of thread "%s" starts when the thread is created', ig.thread_id)
            WHEN ig.started_at < coalesce(prev.started_at, stored.started_at)
                THEN format('generation %s of thread "%s" starts before the generation it follows',
                    ig.ordinal, ig.thread_id)
            WHEN ig.ended_at < ig.started_at
                THEN format('generation %s of thread "%s" ends (%s) before it starts (%s)',
                    ig.ordinal, ig.thread_id, ig.ended_at, ig.started_at)
            WHEN ig.stored_id IS NOT NULL AND ig.stored_started_at <> ig.started_at
                AND EXISTS (SELECT 1 FROM ember.messages AS m WHERE m.generation_id = ig.stored_id)
                THEN format('generation %s of thread "%s" is stored with start %s, not %s',
                    ig.ordinal, ig.thread_id, ig.stored_started_at, ig.started_at)
            WHEN prev.ordinal IS NOT NULL AND ig.ordinal <> prev.ordinal + 1
                THEN format('generation %s of thread "%s" follows generation %s', ig.ordinal, ig.thread_id, prev.ordinal)
            WHEN prev.ordinal IS NULL AND (ig.ordinal < 1 OR ig.ordinal > coalesce(stored.ordinal, 0) + 1)
                THEN format('generation %s of thread "%s" follows generation %s', ig.ordinal, ig.thread_id,
                    coalesce(stored.ordinal, 0))
            WHEN prev.ordinal IS NOT NULL AND prev.ended_at IS NULL
                THEN format('generation %s of thread "%s" follows generation %s, which has not ended',
                    ig.ordinal, ig.thread_id, prev.ordinal)
        END AS error
        FROM import_generations AS ig
        LEFT JOIN LATERAL (
            SELECT o.ordinal, o.started_at, o.ended_at FROM import_generations AS o
            WHERE o.thread_id = ig.thread_id AND o.lineno < ig.lineno
            ORDER BY o.lineno DESC LIMIT 1
        ) AS prev ON true
        LEFT JOIN LATERAL (
            SELECT max(g.ordinal) AS ordinal, max(g.started_at) FILTER (WHERE g.ordinal < ig.ordinal) AS started_at
            FROM ember.generations AS g WHERE g.thread_id = ig.thread_id
        ) AS stored ON true
    ) AS c
    WHERE x.lineno = c.lineno AND c.error IS NOT NULL;
    DELETE FROM import_generations AS ig
    WHERE EXISTS (SELECT 1 FROM import_records AS x WHERE x.lineno = ig.lineno AND x.error IS NOT NULL);

    -- 4. Messages, staged as append_messages stages its rows and checked by the same rules.
    PERFORM ember.staged_rows_reset();
    INSERT INTO staged_rows (
        idx, thread_id, role, author, content, blocks, tool_call_id, tool_name, tool_status,
        from_thread, created_at
    )
    SELECT
        x.lineno, x.doc ->> 'thread', x.doc ->> 'role',
        coalesce(x.doc ->> 'author', CASE x.doc ->> 'role'
            WHEN 'user' THEN 'human' WHEN 'assistant' THEN 'agent' ELSE 'system' END),
        x.doc ->> 'content', (x.doc ->> 'blocks')::json, x.doc ->> 'tool_call_id',
        x.doc ->> 'tool_name', x.doc ->> 'tool_status', x.doc ->> 'from_thread',
        (x.doc ->> 'created_at')::timestamptz
    FROM import_records AS x
    WHERE x.type = 'message' AND x.error IS NULL;
    CREATE INDEX IF NOT EXISTS staged_rows_idx ON staged_rows (idx);
    ANALYZE staged_rows;
    ALTER TABLE staged_rows
    ADD COLUMN IF NOT EXISTS ordinal integer,
    ADD COLUMN IF NOT EXISTS position bigint,
    ADD COLUMN IF NOT EXISTS present boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS file_from_thread text;
    UPDATE staged_rows AS a SET ordinal = p.ordinal, position = p.position
    FROM (
        SELECT s.idx, (x.doc ->> 'generation')::integer AS ordinal,
            row_number() OVER (PARTITION BY s.thread_id, (x.doc ->> 'generation')::integer ORDER BY s.idx) AS position
        FROM staged_rows AS s INNER JOIN import_records AS x ON x.lineno = s.idx
    ) AS p
    WHERE p.idx = a.idx;

    -- The stored rows of the threads the file writes to, numbered within their generation.
    DROP TABLE IF EXISTS pg_temp.import_stored;
    CREATE TEMP TABLE import_stored ON COMMIT DROP AS
    SELECT g.thread_id, g.ordinal, m.role, m.content, m.created_at,
        row_number() OVER (PARTITION BY m.generation_id ORDER BY m.seq) AS position
    FROM ember.generations AS g
    INNER JOIN ember.messages AS m ON m.generation_id = g.id
    WHERE g.thread_id IN (SELECT DISTINCT a.thread_id FROM staged_rows AS a);
    CREATE INDEX ON import_stored (thread_id, ordinal, position);
    ANALYZE import_stored;

    -- Already stored (same thread, generation and position): present if it is the same row,
    -- rejected if it is another.
    UPDATE staged_rows AS a SET
        present = true,
        (error_code, error) = (SELECT
            CASE WHEN NOT same THEN 'import' END,
            CASE WHEN NOT same THEN format('conflicts with stored message %s of generation %s of thread "%s"',
                a.position, a.ordinal, a.thread_id) END
            FROM (SELECT st.content = a.content AND st.role = a.role AND st.created_at = a.created_at AS same) AS c)
    FROM import_stored AS st
    WHERE st.thread_id = a.thread_id AND st.ordinal = a.ordinal AND st.position = a.position;

    UPDATE staged_rows AS a SET (error_code, error) = (
        'import', CASE
            WHEN NOT EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = a.thread_id)
                AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = a.thread_id)
                THEN format('unknown thread "%s"', a.thread_id)
            WHEN EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = a.thread_id AND t.status = 'archived')
                THEN format('thread "%s" is archived: it takes no new messages', a.thread_id)
            WHEN NOT EXISTS (SELECT 1 FROM import_generations AS ig WHERE ig.thread_id = a.thread_id AND ig.ordinal = a.ordinal)
                AND NOT EXISTS (
                    SELECT 1 FROM ember.generations AS g
                    INNER JOIN ember.threads AS t ON t.id = g.thread_id
                    WHERE g.thread_id = a.thread_id AND g.ordinal = a.ordinal
                        AND NOT EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = t.id AND NOT it.stored))
                -- create_thread opens generation 1 of a new thread: a file may leave it implicit.
                AND NOT (a.ordinal = 1 AND EXISTS (
                    SELECT 1 FROM import_threads AS it WHERE it.id = a.thread_id AND NOT it.stored))
                THEN format('thread "%s" has no generation %s', a.thread_id, a.ordinal)
            WHEN a.from_thread IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = a.from_thread)
                AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = a.from_thread)
                THEN format('unknown from_thread "%s"', a.from_thread)
        END)
    WHERE a.error IS NULL AND NOT a.present;
    UPDATE staged_rows SET error_code = NULL WHERE error IS NULL;

    -- append_message's own rules for the rows to write (staged_rows_check). A from_thread
    -- defined in this file is not stored yet: it is set aside for the check, and the flow
    -- trigger checks it when the row is written.
    UPDATE staged_rows AS a SET file_from_thread = a.from_thread, from_thread = NULL
    WHERE a.from_thread IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = a.from_thread);
    UPDATE staged_rows AS a SET error_code = 'skip' WHERE a.present AND a.error IS NULL;
    PERFORM ember.staged_rows_check();
    UPDATE staged_rows AS a SET error_code = NULL WHERE a.error_code = 'skip';
    UPDATE staged_rows AS a SET from_thread = a.file_from_thread WHERE a.file_from_thread IS NOT NULL;

    -- Time runs forwards within a thread: no row before the thread was created, before an
    -- earlier line's row of the thread, or before the thread's stored rows.
    UPDATE staged_rows AS a SET (error_code, error) = ('import', format(
            'time runs backwards in thread "%s": %s is before %s (its creation or an earlier row)',
            a.thread_id, a.created_at, b.latest))
    FROM (
        SELECT s.idx, greatest(
            max(s.created_at) FILTER (WHERE s.error IS NULL) OVER (PARTITION BY s.thread_id ORDER BY s.idx
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
            (SELECT max(p.last_message_at) FROM ember.generation_progress AS p WHERE p.thread_id = s.thread_id),
            coalesce(
                (SELECT it.created_at FROM import_threads AS it WHERE it.id = s.thread_id AND NOT it.stored),
                (SELECT t.created_at FROM ember.threads AS t WHERE t.id = s.thread_id)
            )
        ) AS latest
        FROM staged_rows AS s
    ) AS b
    WHERE b.idx = a.idx AND a.error IS NULL AND NOT a.present AND a.created_at < b.latest;

    UPDATE import_records AS x SET error = a.error
    FROM staged_rows AS a WHERE a.idx = x.lineno AND a.error IS NOT NULL;

    SELECT coalesce(jsonb_agg(jsonb_build_object('line', x.lineno, 'reason', x.error) ORDER BY x.lineno), '[]')
    INTO v_rejected
    FROM import_records AS x WHERE x.error IS NOT NULL;

    IF jsonb_array_length(v_rejected) > 0 AND NOT p_partial THEN
        RETURN jsonb_build_object('written', false, 'threads', 0, 'generations', 0, 'messages', 0,
            'present', 0, 'rejected', v_rejected);
    END IF;

    -- 5. Write. Threads first (create_thread opens generation 1 at the thread's creation).
    FOR r IN SELECT * FROM import_threads AS it WHERE NOT it.stored ORDER BY it.lineno LOOP
        PERFORM ember.create_thread(r.id, r.kind, r.title, r.category, r.seal_tier, r.model, r.created_at);
        v_threads := v_threads + 1;
    END LOOP;
    PERFORM 1 FROM ember.threads AS t
    WHERE t.id IN (SELECT ig.thread_id FROM import_generations AS ig UNION SELECT a.thread_id FROM staged_rows AS a)
    ORDER BY t.id FOR UPDATE;
    UPDATE import_generations AS ig SET stored_id = g.id
    FROM ember.generations AS g
    WHERE ig.stored_id IS NULL AND g.thread_id = ig.thread_id AND g.ordinal = ig.ordinal;

    -- A stored generation the file ends (generation 1 of a new thread, or a stored open one).
    UPDATE ember.generations AS g SET ended_at = ig.ended_at
    FROM import_generations AS ig
    WHERE ig.stored_id = g.id AND g.ended_at IS NULL AND ig.ended_at IS NOT NULL;
    -- Any other open stored generation of the thread ends where the file's next one starts.
    UPDATE ember.generations AS g SET ended_at = greatest(g.started_at, n.started_at)
    FROM (
        SELECT ig.thread_id, min(ig.started_at) AS started_at
        FROM import_generations AS ig WHERE ig.stored_id IS NULL GROUP BY ig.thread_id
    ) AS n
    WHERE g.thread_id = n.thread_id AND g.ended_at IS NULL;
    WITH ins AS (
        INSERT INTO ember.generations (thread_id, ordinal, started_at, ended_at)
        SELECT ig.thread_id, ig.ordinal, ig.started_at, ig.ended_at
        FROM import_generations AS ig WHERE ig.stored_id IS NULL
        ORDER BY ig.thread_id, ig.ordinal
        RETURNING 1
    )
    SELECT count(*) INTO v_generations FROM ins;

    UPDATE staged_rows AS a SET generation_id = g.id
    FROM ember.generations AS g WHERE g.thread_id = a.thread_id AND g.ordinal = a.ordinal;

    -- Messages in file order, so seq follows it. Labels brought by a row from another thread
    -- widen its generation in the row's own insert trigger, so later rows of the same statement
    -- carry them (functions/020_labels.sql). Marked as a sanctioned insert for
    -- messages_arrival_guard (991_input_guards.sql).
    PERFORM set_config('ember.inserting_message', 'on', true);
    INSERT INTO ember.messages (
        seq, thread_id, generation_id, role, author, content, blocks,
        tool_call_id, tool_name, tool_status, from_thread, created_at
    )
    SELECT
        nextval('ember.message_seq'), a.thread_id, a.generation_id, a.role, a.author, a.content,
        a.blocks, a.tool_call_id, a.tool_name, a.tool_status, a.from_thread, a.created_at
    FROM staged_rows AS a
    WHERE a.error IS NULL AND NOT a.present
    ORDER BY a.idx;
    GET DIAGNOSTICS v_messages = ROW_COUNT;
    PERFORM set_config('ember.inserting_message', '', true);
    SELECT count(*) INTO v_present FROM staged_rows AS a WHERE a.present;

    -- Thread status last: an archived thread took its history first.
    FOR r IN
        SELECT it.id, it.status, it.created_at FROM import_threads AS it
        INNER JOIN ember.threads AS t ON t.id = it.id
        WHERE NOT it.stored AND t.status <> it.status
        ORDER BY it.lineno
    LOOP
        PERFORM ember.set_thread_status(r.id, r.status, r.created_at);
    END LOOP;

    RETURN jsonb_build_object('written', true, 'threads', v_threads, 'generations', v_generations,
        'messages', v_messages, 'present', v_present, 'rejected', v_rejected);
END;
$$;
