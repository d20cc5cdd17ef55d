-- Import (docs/import-format.md). `ember import` checks the header, COPYs every other line into
-- pg_temp.import_lines (lineno, line) and calls import_staged(): every line is checked
-- set-based and each rejected one reported with its number and reason; then, unless a line was
-- rejected and p_partial is false, the accepted records are written: threads by create_thread,
-- generations by one INSERT, messages (checked by staged_rows_check, as append_messages checks
-- its rows) by one INSERT ... SELECT in file order under the threads' row locks, so the row
-- triggers run as for append_message and seq follows the file. Identity: thread id; thread and
-- ordinal; thread, generation and position. A second import of a file writes nothing.
--
-- Every step is one statement over the whole file, and the common case costs no function call
-- per line: the lines are parsed by one cast, a well-formed message is recognised by an inlined
-- expression, its time and blocks are cast in the statement that stages it, and only when one of
-- those raises is the file gone over line by line (with an exception block per line) to name the
-- lines at fault. The checks that follow update only the rows they reject.
--
-- A file imported whole is recorded in ember.import_files by its digest, with what it held and a
-- fingerprint of its threads as the import left them (import_fingerprint). Importing it again
-- while the fingerprint still holds (nothing was appended to, ended, erased from or changed in
-- those threads) is answered from the record without reading the file: every record is present.
-- Anything else goes through the whole path, which reaches the same answer the long way.

-- The threads' state as far as an import can tell: each thread row, and per generation its
-- bounds, its last row and how many of its rows were erased.
CREATE OR REPLACE FUNCTION ember.import_fingerprint(p_threads text[])
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT md5(coalesce(string_agg(x.part, E'\n' ORDER BY x.id), ''))
    FROM (
        SELECT u.id, concat_ws('|', u.id, t.kind, t.status, t.seal_tier, t.category, t.model,
            t.title, t.created_at, (
                SELECT string_agg(concat_ws(':', g.ordinal, g.started_at, g.ended_at, p.last_seq, (
                        SELECT count(*) FROM ember.messages AS m
                        WHERE m.generation_id = g.id AND m.erased_by IS NOT NULL
                    )), ',' ORDER BY g.ordinal)
                FROM ember.generations AS g
                LEFT JOIN ember.generation_progress AS p ON p.generation_id = g.id
                WHERE g.thread_id = t.id
            )) AS part
        FROM unnest(p_threads) AS u (id)
        LEFT JOIN ember.threads AS t ON t.id = u.id
    ) AS x
$$;

-- What a file with this digest holds, all of it present, when it was imported whole before and
-- its threads are as that import left them; NULL otherwise (the file must be read).
CREATE OR REPLACE FUNCTION ember.import_known(p_digest text)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object('written', true, 'threads', 0, 'generations', 0, 'messages', 0,
        'present', (f.held ->> 'messages')::integer,
        'threads_present', (f.held ->> 'threads')::integer,
        'generations_present', (f.held ->> 'generations')::integer,
        'rejected', '[]'::jsonb, 'known', true)
    FROM ember.import_files AS f
    WHERE f.digest = p_digest AND f.fingerprint = ember.import_fingerprint(f.threads)
$$;

-- The staged message rows of the file (staged_rows plus the import's columns), numbered within
-- their generation. Raises a data exception when a time or blocks value does not cast.
CREATE OR REPLACE FUNCTION ember.import_stage_messages()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.staged_rows_reset();
    ALTER TABLE staged_rows
    ADD COLUMN IF NOT EXISTS ordinal integer,
    ADD COLUMN IF NOT EXISTS position bigint,
    ADD COLUMN IF NOT EXISTS present boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS file_from_thread text;
    INSERT INTO staged_rows (
        idx, tenant_id, thread_id, role, author, content, blocks, tool_call_id, tool_name, tool_status,
        from_thread, created_at, ordinal, position
    )
    SELECT
        x.lineno, ember.sole_tenant(), x.doc ->> 'thread', x.doc ->> 'role',
        coalesce(x.doc ->> 'author', CASE x.doc ->> 'role'
            WHEN 'user' THEN 'human' WHEN 'assistant' THEN 'agent' ELSE 'system' END),
        x.doc ->> 'content', (x.doc ->> 'blocks')::json, x.doc ->> 'tool_call_id',
        x.doc ->> 'tool_name', x.doc ->> 'tool_status', x.doc ->> 'from_thread',
        (x.doc ->> 'created_at')::timestamptz, (x.doc ->> 'generation')::integer,
        row_number() OVER (
            PARTITION BY x.doc ->> 'thread', (x.doc ->> 'generation')::integer ORDER BY x.lineno
        )
    FROM import_records AS x
    WHERE x.type = 'message' AND x.error IS NULL;
END;
$$;

-- 1. Every line: JSON, an object, a known type, well-formed fields, into import_records (lineno,
-- doc, type, error). All lines are parsed by one cast; only if one of them is not JSON is each
-- parsed in its own exception block (text_to_jsonb_or_null), so that the others are kept and the
-- bad ones named. The shape of a message (no unknown field, each field of its JSON type; its
-- time and blocks are cast where it is staged) is written out in the statement rather than
-- called: every function in schema ember has a pinned search_path, which keeps PostgreSQL from
-- inlining it, and the call per line cost more than the parse. Other lines, and messages the
-- expression does not clear, go to import_record_error for the reason.
CREATE OR REPLACE FUNCTION ember.import_parse_lines()
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_records constant text := $q$
        CREATE TEMP TABLE import_records ON COMMIT DROP AS
        SELECT l.lineno, j.doc, j.doc ->> 'type' AS type, CASE
            WHEN j.doc IS NULL THEN 'not JSON'
            WHEN jsonb_typeof(j.doc) <> 'object' THEN 'not a JSON object but ' || jsonb_typeof(j.doc)
            WHEN jsonb_typeof(j.doc -> 'type') IS DISTINCT FROM 'string'
                OR j.doc ->> 'type' NOT IN ('thread', 'generation', 'message')
                THEN 'unknown record type ' || coalesce((j.doc -> 'type')::text, '(none)')
            WHEN j.doc ->> 'type' = 'message'
                AND (j.doc - ARRAY[
                    'type', 'thread', 'generation', 'role', 'author', 'content', 'blocks',
                    'tool_call_id', 'tool_name', 'tool_status', 'from_thread', 'created_at'
                ]) = '{}'::jsonb
                AND jsonb_typeof(j.doc -> 'thread') = 'string'
                AND jsonb_typeof(j.doc -> 'generation') = 'number'
                AND j.doc ->> 'generation' ~ '^[0-9]{1,9}$'
                AND jsonb_typeof(j.doc -> 'role') = 'string'
                AND jsonb_typeof(j.doc -> 'content') = 'string'
                AND jsonb_typeof(j.doc -> 'created_at') = 'string'
                AND coalesce(jsonb_typeof(j.doc -> 'author'), 'null') IN ('string', 'null')
                AND coalesce(jsonb_typeof(j.doc -> 'blocks'), 'null') IN ('string', 'null')
                AND coalesce(jsonb_typeof(j.doc -> 'tool_call_id'), 'null') IN ('string', 'null')
                AND coalesce(jsonb_typeof(j.doc -> 'tool_name'), 'null') IN ('string', 'null')
                AND coalesce(jsonb_typeof(j.doc -> 'tool_status'), 'null') IN ('string', 'null')
                AND coalesce(jsonb_typeof(j.doc -> 'from_thread'), 'null') IN ('string', 'null')
                THEN NULL
            ELSE ember.import_record_error(j.doc ->> 'type', j.doc)
        END AS error
        FROM pg_temp.import_lines AS l
        -- OFFSET 0 keeps the planner from copying the parse into every use of doc.
        CROSS JOIN LATERAL (SELECT %s AS doc OFFSET 0) AS j
    $q$;
BEGIN
    BEGIN
        EXECUTE format(v_records, 'l.line::jsonb');
    EXCEPTION WHEN data_exception THEN
        EXECUTE format(v_records, 'ember.text_to_jsonb_or_null(l.line)');
    END;
    -- Temporary tables have no statistics until analyzed; a guess may nest loops.
    CREATE UNIQUE INDEX ON import_records (lineno);
    ANALYZE import_records;
END;
$$;

-- 2. Threads, into import_threads. A thread already stored with the same kind is present; with
-- another kind, or a second record of the same id, the line is rejected. Field values are
-- checked here by the rules create_thread applies, so that a rejection names the line.
CREATE OR REPLACE FUNCTION ember.import_check_threads()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
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
            WHEN it.seal_tier NOT IN ('open', 'isolated')
                THEN format('thread "%s": unknown seal tier "%s"', it.id, it.seal_tier)
            -- A stored thread: the file may not loosen who reads it (the rule create_thread
            -- states in EM013 too); a file that isolates it seals it (import_seal_threads).
            WHEN it.stored THEN ember.thread_record_conflict(ember.sole_tenant(), it.id, it.kind, it.category, it.seal_tier)
            WHEN it.kind NOT IN ('main', 'side', 'task')
                THEN format('thread "%s": unknown kind "%s" (main, side, task)', it.id, it.kind)
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
    -- A thread whose every record was refused takes none of the file's generations or rows:
    -- written into the stored thread, they would land under the stored rule the record disputed
    -- (its labels, its seal), which is how a file could loosen who reads them.
    CREATE TEMP TABLE import_refused_threads ON COMMIT DROP AS
    SELECT it.id, min(it.lineno) AS lineno
    FROM import_threads AS it
    INNER JOIN import_records AS x ON x.lineno = it.lineno
    GROUP BY it.id
    HAVING bool_and(x.error IS NOT NULL);
    DELETE FROM import_threads AS it
    WHERE EXISTS (SELECT 1 FROM import_records AS x WHERE x.lineno = it.lineno AND x.error IS NOT NULL);
END;
$$;

-- 2b. A stored open thread that the file says is isolated is sealed before anything of the file
-- is checked against it or written into it: the stricter rule applies to the stored thread
-- first (seal_thread, with everything a seal does), and the summary names it. Returns the
-- threads sealed. A rejected file undoes this with everything else (import_staged).
CREATE OR REPLACE FUNCTION ember.import_seal_threads()
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_sealed text[] := '{}';
    r record;
BEGIN
    FOR r IN
        SELECT it.id FROM import_threads AS it
        INNER JOIN ember.threads AS t ON t.id = it.id
        WHERE it.stored AND it.seal_tier = 'isolated' AND t.seal_tier = 'open'
        ORDER BY it.id
    LOOP
        PERFORM ember.seal_thread(ember.sole_tenant(), r.id);
        v_sealed := v_sealed || r.id;
    END LOOP;
    RETURN v_sealed;
END;
$$;

-- 3. Generations, into import_generations: of a known thread (stored, or accepted above),
-- numbered on from what is stored, only the last one open. A stored generation with the same
-- start is present.
CREATE OR REPLACE FUNCTION ember.import_check_generations()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
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
            WHEN ig.thread_id = 'memory-steward'
                THEN 'the memory steward''s record is written by the steward only'
            WHEN EXISTS (SELECT 1 FROM import_refused_threads AS r WHERE r.id = ig.thread_id)
                THEN format('thread "%s": its record on line %s was refused', ig.thread_id,
                    (SELECT r.lineno FROM import_refused_threads AS r WHERE r.id = ig.thread_id))
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
END;
$$;

-- 4. Messages, staged as append_messages stages its rows: which are already stored (present, or
-- rejected when another row holds their place) and which have nowhere to go. A time or blocks
-- value that does not cast stops the one staging statement; then the message lines are checked
-- one by one for the reason, and staged again without them.
CREATE OR REPLACE FUNCTION ember.import_check_messages()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    BEGIN
        PERFORM ember.import_stage_messages();
    EXCEPTION WHEN data_exception THEN
        UPDATE import_records AS x SET error = ember.import_record_error('message', x.doc)
        WHERE x.type = 'message' AND x.error IS NULL AND NOT ember.import_message_ok(x.doc);
        PERFORM ember.import_stage_messages();
    END;
    CREATE INDEX IF NOT EXISTS staged_rows_idx ON staged_rows (idx);
    ANALYZE staged_rows;

    -- The stored rows of the threads the file writes to, numbered within their generation.
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

    -- Where a row may go: a generation of the file, a stored generation of a thread that is not
    -- archived, or generation 1 of a thread the file creates (create_thread opens it, so a file
    -- may leave it implicit). Only the rows that go elsewhere, or come from another thread, are
    -- asked why.
    CREATE TEMP TABLE import_targets ON COMMIT DROP AS
    SELECT ig.thread_id, ig.ordinal FROM import_generations AS ig
    WHERE NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = ig.thread_id AND t.status = 'archived')
    UNION
    SELECT g.thread_id, g.ordinal
    FROM ember.generations AS g INNER JOIN ember.threads AS t ON t.id = g.thread_id
    WHERE t.status <> 'archived' AND g.thread_id IN (SELECT DISTINCT a.thread_id FROM staged_rows AS a)
    UNION
    SELECT it.id, 1 FROM import_threads AS it WHERE NOT it.stored;
    ANALYZE import_targets;

    UPDATE staged_rows AS a SET (error_code, error) = ('import', c.error)
    FROM (
        SELECT s.idx, CASE
            WHEN s.thread_id = 'memory-steward'
                THEN 'the memory steward''s record is written by the steward only'
            WHEN EXISTS (SELECT 1 FROM import_refused_threads AS r WHERE r.id = s.thread_id)
                THEN format('thread "%s": its record on line %s was refused', s.thread_id,
                    (SELECT r.lineno FROM import_refused_threads AS r WHERE r.id = s.thread_id))
            WHEN s.from_thread = 'memory-steward'
                THEN 'a row from the memory steward''s record: it is never copied, forked or quoted'
            WHEN NOT EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = s.thread_id)
                AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = s.thread_id)
                THEN format('unknown thread "%s"', s.thread_id)
            WHEN EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = s.thread_id AND t.status = 'archived')
                THEN format('thread "%s" is archived: it takes no new messages', s.thread_id)
            WHEN NOT EXISTS (SELECT 1 FROM import_targets AS o WHERE o.thread_id = s.thread_id AND o.ordinal = s.ordinal)
                THEN format('thread "%s" has no generation %s', s.thread_id, s.ordinal)
            WHEN s.from_thread IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM import_threads AS it WHERE it.id = s.from_thread)
                AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = s.from_thread)
                THEN format('unknown from_thread "%s"', s.from_thread)
        END AS error
        FROM staged_rows AS s
        WHERE s.error IS NULL AND NOT s.present AND (
            s.from_thread IS NOT NULL
            OR s.thread_id = 'memory-steward'
            OR NOT EXISTS (SELECT 1 FROM import_targets AS o WHERE o.thread_id = s.thread_id AND o.ordinal = s.ordinal)
            OR EXISTS (SELECT 1 FROM import_refused_threads AS r WHERE r.id = s.thread_id)
        )
    ) AS c
    WHERE a.idx = c.idx AND c.error IS NOT NULL;
END;
$$;

-- 5. The rows to write, by append_message's own rules (staged_rows_check) and in time order;
-- then every rejected row's reason goes onto its line.
CREATE OR REPLACE FUNCTION ember.import_check_message_rules()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    -- append_message's own rules for the rows to write (staged_rows_check). A from_thread
    -- defined in this file is not stored yet: it is set aside for the check, and the flow
    -- trigger checks it when the row is written.
    UPDATE staged_rows AS a SET file_from_thread = a.from_thread, from_thread = NULL
    WHERE a.from_thread IS NOT NULL AND a.from_thread <> 'memory-steward'
        AND NOT EXISTS (SELECT 1 FROM ember.threads AS t WHERE t.id = a.from_thread);
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
            f.floor
        ) AS latest
        FROM staged_rows AS s
        LEFT JOIN (
            SELECT d.thread_id, greatest(
                (SELECT max(p.last_message_at) FROM ember.generation_progress AS p WHERE p.thread_id = d.thread_id),
                coalesce(
                    (SELECT it.created_at FROM import_threads AS it WHERE it.id = d.thread_id AND NOT it.stored),
                    (SELECT t.created_at FROM ember.threads AS t WHERE t.id = d.thread_id)
                )
            ) AS floor
            FROM (SELECT DISTINCT a.thread_id FROM staged_rows AS a) AS d
        ) AS f ON f.thread_id = s.thread_id
    ) AS b
    WHERE b.idx = a.idx AND a.error IS NULL AND NOT a.present AND a.created_at < b.latest;

    UPDATE import_records AS x SET error = a.error
    FROM staged_rows AS a WHERE a.idx = x.lineno AND a.error IS NOT NULL;
END;
$$;

-- What the file holds, counted before anything is written: a generation record is new
-- (generation 1 of a thread the file creates is one, though create_thread opens it) or
-- present, and so is a thread record; a message row is present or to be written.
CREATE OR REPLACE FUNCTION ember.import_counts()
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- PL/pgSQL rather than SQL: a SQL body is checked when created, before these tables exist.
    RETURN jsonb_build_object(
        'threads', (SELECT count(*) FROM import_threads AS it WHERE NOT it.stored),
        'threads_present', (SELECT count(*) FROM import_threads AS it WHERE it.stored),
        'generations', (SELECT count(*) FROM import_generations AS ig WHERE ig.stored_id IS NULL),
        'generations_present', (SELECT count(*) FROM import_generations AS ig WHERE ig.stored_id IS NOT NULL),
        'present', (SELECT count(*) FROM staged_rows AS a WHERE a.present)
    );
END;
$$;

-- 6. Write threads and generations: threads first (create_thread opens generation 1 at the
-- thread's creation), then every thread the file writes to is locked, and the file's
-- generations are ended, opened and inserted.
CREATE OR REPLACE FUNCTION ember.import_write_threads()
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM import_threads AS it WHERE NOT it.stored ORDER BY it.lineno LOOP
        PERFORM ember.create_thread(ember.sole_tenant(), r.id, r.kind, r.title, r.category, r.seal_tier, r.model, r.created_at);
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
    INSERT INTO ember.generations (thread_id, ordinal, started_at, ended_at)
    SELECT ig.thread_id, ig.ordinal, ig.started_at, ig.ended_at
    FROM import_generations AS ig WHERE ig.stored_id IS NULL
    ORDER BY ig.thread_id, ig.ordinal;
END;
$$;

-- 7. Write messages, in one INSERT; returns how many.
CREATE OR REPLACE FUNCTION ember.import_write_messages()
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_messages integer;
BEGIN
    -- Messages in file order, so seq follows it (nextval is computed above the sort). Marked as
    -- a sanctioned insert for messages_arrival_guard (991_input_guards.sql). When no row comes
    -- from another thread, no row of the statement can widen a generation's labels, so each row
    -- carries its generation's labels, looked up once per generation ('labelled'); otherwise the
    -- row trigger stamps every row, and labels brought by a row from another thread widen its
    -- generation in that row's own insert trigger, so later rows of the same statement carry
    -- them (functions/020_labels.sql).
    PERFORM set_config('ember.inserting_message', CASE
        WHEN EXISTS (
            SELECT 1 FROM staged_rows AS a
            WHERE a.error IS NULL AND NOT a.present AND a.from_thread <> a.thread_id
        ) THEN 'on' ELSE 'labelled' END, true);
    WITH target AS MATERIALIZED (
        SELECT g.id, g.thread_id, g.ordinal, ember.generation_labels(g.id) AS labels
        FROM ember.generations AS g
        WHERE g.thread_id IN (SELECT DISTINCT a.thread_id FROM staged_rows AS a)
    )
    INSERT INTO ember.messages (
        seq, thread_id, generation_id, role, author, content, blocks,
        tool_call_id, tool_name, tool_status, from_thread, categories, created_at
    )
    SELECT
        nextval('ember.message_seq'), a.thread_id, g.id, a.role, a.author, a.content,
        a.blocks, a.tool_call_id, a.tool_name, a.tool_status, a.from_thread, g.labels, a.created_at
    FROM staged_rows AS a
    INNER JOIN target AS g ON g.thread_id = a.thread_id AND g.ordinal = a.ordinal
    WHERE a.error IS NULL AND NOT a.present
    ORDER BY a.idx;
    GET DIAGNOSTICS v_messages = ROW_COUNT;
    PERFORM set_config('ember.inserting_message', '', true);
    RETURN v_messages;
END;
$$;

-- 8. Thread status last: an archived thread took its history first.
CREATE OR REPLACE FUNCTION ember.import_write_statuses()
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT it.id, it.status, it.created_at FROM import_threads AS it
        INNER JOIN ember.threads AS t ON t.id = it.id
        WHERE NOT it.stored AND t.status <> it.status
        ORDER BY it.lineno
    LOOP
        PERFORM ember.set_thread_status(ember.sole_tenant(), r.id, r.status, r.created_at);
    END LOOP;
END;
$$;

-- 9. A file taken whole is remembered under its digest, with what it held (p_held), so that
-- importing it again can be answered at once (import_known).
CREATE OR REPLACE FUNCTION ember.import_remember(p_digest text, p_held jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO ember.import_files AS f (digest, threads, held, fingerprint)
    SELECT p_digest, d.threads, p_held, ember.import_fingerprint(d.threads)
    FROM (
        SELECT coalesce(array_agg(DISTINCT u.id ORDER BY u.id), '{}') AS threads
        FROM (
            SELECT it.id FROM import_threads AS it
            UNION SELECT ig.thread_id FROM import_generations AS ig
            UNION SELECT a.thread_id FROM staged_rows AS a
        ) AS u
    ) AS d
    ON CONFLICT (tenant_id, digest) DO UPDATE SET
        threads = excluded.threads, held = excluded.held, fingerprint = excluded.fingerprint,
        imported_at = excluded.imported_at;
END;
$$;

-- The digest is the file's SHA-256 (hex), recorded when the file is taken whole. The stages
-- above run in order, each over the temporary tables the ones before it left (import_records,
-- import_threads, import_generations, staged_rows); the checks only mark lines, and nothing is
-- written unless no line was rejected or p_partial is true.
DROP FUNCTION IF EXISTS ember.import_staged(boolean);
CREATE OR REPLACE FUNCTION ember.import_staged(p_partial boolean DEFAULT FALSE, p_digest text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_rejected jsonb;
    v_counts jsonb;
    v_messages integer;
    v_sealed text[];
BEGIN
    DROP TABLE IF EXISTS pg_temp.import_records, pg_temp.import_threads, pg_temp.import_generations,
        pg_temp.import_stored, pg_temp.import_targets, pg_temp.import_refused_threads;
    -- The file's rows are sorted and hashed whole; the default work_mem sends a file of a few
    -- tens of megabytes to disk. For this transaction only.
    IF pg_size_bytes(current_setting('work_mem')) < pg_size_bytes('64MB') THEN
        PERFORM set_config('work_mem', '64MB', true);
    END IF;

    PERFORM ember.import_parse_lines();
    PERFORM ember.import_check_threads();
    -- The seals come before the checks of generations and rows, which then see each thread as
    -- it will be; a file that is refused undoes them (the block's savepoint) and writes nothing.
    BEGIN
        v_sealed := ember.import_seal_threads();
        PERFORM ember.import_check_generations();
        PERFORM ember.import_check_messages();
        PERFORM ember.import_check_message_rules();

        SELECT coalesce(jsonb_agg(jsonb_build_object('line', x.lineno, 'reason', x.error) ORDER BY x.lineno), '[]')
        INTO v_rejected
        FROM import_records AS x WHERE x.error IS NOT NULL;
        IF jsonb_array_length(v_rejected) > 0 AND NOT p_partial THEN
            RAISE EXCEPTION 'import refused' USING ERRCODE = 'EM142';
        END IF;
    EXCEPTION WHEN SQLSTATE 'EM142' THEN
        RETURN jsonb_build_object('written', false, 'threads', 0, 'generations', 0, 'messages', 0,
            'present', 0, 'threads_present', 0, 'generations_present', 0, 'sealed', '[]'::jsonb,
            'rejected', v_rejected);
    END;

    v_counts := ember.import_counts();
    PERFORM ember.import_write_threads();
    v_messages := ember.import_write_messages();
    PERFORM ember.import_write_statuses();

    IF p_digest IS NOT NULL AND jsonb_array_length(v_rejected) = 0 THEN
        PERFORM ember.import_remember(p_digest, jsonb_build_object(
            'threads', (v_counts ->> 'threads')::integer + (v_counts ->> 'threads_present')::integer,
            'generations', (v_counts ->> 'generations')::integer + (v_counts ->> 'generations_present')::integer,
            'messages', v_messages + (v_counts ->> 'present')::integer));
    END IF;

    RETURN v_counts || jsonb_build_object('written', true, 'messages', v_messages,
        'sealed', to_jsonb(v_sealed), 'rejected', v_rejected);
END;
$$;
