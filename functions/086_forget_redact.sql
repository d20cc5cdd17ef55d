-- Forgetting, part one (issue 17): the tombstone and the redactions forgetting applies to text
-- that quotes an erased row or a forgotten fact. The cascade itself is functions/087_forget.sql.

CREATE OR REPLACE FUNCTION ember.forget_tombstone()
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$ SELECT '[forgotten]'::text $$;

-- What replaces redacted text in the steward's record: the forgetting tombstone, or '[sealed]'
-- while a seal redacts (the transaction-local setting ember.redacting, set by
-- steward_seal_redact in 059_steward_seal.sql), so the record says why the text is gone.
CREATE OR REPLACE FUNCTION ember.redaction_tombstone()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN current_setting('ember.redacting', true) = 'seal' THEN '[sealed]'
                ELSE ember.forget_tombstone() END
$$;

-- A string worth searching for elsewhere: short ones ("ok", "yes") name nothing and would match
-- unrelated rows.
CREATE OR REPLACE FUNCTION ember.forget_needles(p_texts text[])
RETURNS text[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(array_agg(DISTINCT n), '{}')
    FROM unnest(p_texts) AS t (v)
    CROSS JOIN LATERAL (
        VALUES (btrim(t.v)),
        -- The same text as it appears inside JSON (blocks, tool inputs): escaped, unquoted.
        (substr(to_json(btrim(t.v))::text, 2, length(to_json(btrim(t.v))::text) - 2))
    ) AS x (n)
    WHERE char_length(btrim(t.v)) >= 8
$$;

-- Lines of p_text whose leading id (the first group of p_pattern, e.g. '^m:(\d+) ' for a
-- rendered row, '^fact (\d+) \[' for a search result) is in p_ids, replaced by p_label || id ||
-- ' [forgotten]'. A hash join of lines to ids, so a page of thousands of rows costs one pass.
-- Rows render on one line each (035_render.sql escapes line breaks), so a line is one row.
CREATE OR REPLACE FUNCTION ember.forget_redact_lines(p_text text, p_ids bigint[], p_pattern text, p_label text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT string_agg(
        CASE WHEN e.id IS NOT NULL THEN p_label || e.id || ' ' || ember.redaction_tombstone() ELSE l.line END,
        E'\n' ORDER BY l.o)
    FROM regexp_split_to_table(p_text, E'\n') WITH ORDINALITY AS l (line, o)
    LEFT JOIN (SELECT DISTINCT x.id FROM unnest(p_ids) AS x (id)) AS e
        ON e.id = (substring(l.line FROM p_pattern))::bigint
$$;

-- The same on raw blocks: each text block redacted by lines. Blocks that are not a JSON array
-- of objects are dropped whole (nothing else can be said about what they hold).
CREATE OR REPLACE FUNCTION ember.forget_redact_blocks(p_blocks json, p_ids bigint[], p_pattern text, p_label text)
RETURNS json
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN p_blocks IS NULL THEN NULL
        WHEN json_typeof(p_blocks) <> 'array' THEN NULL
        ELSE (
            SELECT coalesce(json_agg(
                CASE WHEN jsonb_typeof(b.v) = 'object' AND jsonb_typeof(b.v -> 'text') = 'string'
                     THEN jsonb_set(b.v, '{text}',
                                    to_jsonb(ember.forget_redact_lines(b.v ->> 'text', p_ids, p_pattern, p_label)))
                     ELSE b.v END
                ORDER BY b.o), '[]'::json)
            FROM jsonb_array_elements(p_blocks::jsonb) WITH ORDINALITY AS b (v, o)
        )
    END
$$;

-- Every occurrence of each needle replaced by the tombstone, in the text and in the raw blocks
-- (where a needle appears JSON-escaped; forget_needles gives both forms). A replacement inside a
-- JSON string keeps the document valid; if it somehow does not, the blocks go whole.
CREATE OR REPLACE FUNCTION ember.forget_redact_needles(INOUT p_content text, INOUT p_blocks json, p_needles text[])
LANGUAGE plpgsql
AS $$
DECLARE
    n text;
    v_blocks text := p_blocks::text;
BEGIN
    FOREACH n IN ARRAY p_needles LOOP
        IF strpos(p_content, n) > 0 THEN
            p_content := replace(p_content, n, ember.redaction_tombstone());
        END IF;
        IF strpos(v_blocks, n) > 0 THEN
            v_blocks := replace(v_blocks, n, ember.redaction_tombstone());
        END IF;
    END LOOP;
    BEGIN
        p_blocks := v_blocks::json;
    EXCEPTION
        WHEN invalid_text_representation THEN
            p_blocks := NULL;
    END;
END;
$$;

-- The steward's record quotes what it read and wrote. Three shapes, each redacted by structure
-- rather than by searching every row for every erased text (which would cost rows times texts):
--   * the backlog pages a run was given (a 'system' user row per wake): each erased row is one
--     line 'm:<id> ...', replaced by a tombstone line;
--   * search_memory results, one line 'fact <id> [kind]: text' per fact: a forgotten fact's
--     line is replaced wherever it was returned;
--   * the model's own turns (assistant rows: text and tool calls such as write_fact) in the
--     runs that read an erased row or wrote a forgotten fact: the erased texts that run read and
--     the forgotten facts it wrote are replaced where they appear verbatim.
-- Rows of steward generations no run owns (none in normal operation) are searched for every
-- text. Returns the ids of the rows changed.
-- Whether a steward run owns this generation (each wake opens one). Only called when the
-- steward's tables exist.
CREATE OR REPLACE FUNCTION ember.steward_generation_has_run(p_generation uuid)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM ember.steward_runs AS s WHERE s.generation_id = p_generation);
END;
$$;

-- The steward's record, first pass: in each wake that read an erased row or wrote a forgotten
-- fact, its pages' lines of the erased rows, and the texts it quoted in its own turns. Returns the
-- ids of the rows changed. Only called when the steward's tables exist.
CREATE OR REPLACE FUNCTION ember.forget_steward_runs(
    p_erased bigint[], p_contents text[], p_retired bigint[], p_texts text[], p_rows_since timestamptz
)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_changed bigint[] := '{}';
    v_needles text[];
    r record;
    m record;
    v_content text;
    v_blocks json;
BEGIN
    -- Wakes that read an erased row (only a wake started after the oldest erased row can
    -- have), found by a hash join of what they read to what was erased rather than by
    -- array overlap, which compares every pair; and wakes that wrote a forgotten fact.
    FOR r IN
        WITH erased AS (
            SELECT e.id, e.content FROM unnest(p_erased, p_contents) AS e (id, content)
        ),
        reads AS (
            SELECT s.id AS run_id, array_agg(x.id) AS read_erased, array_agg(e.content) AS contents
            FROM ember.steward_runs AS s
            CROSS JOIN LATERAL unnest(s.read_message_ids) AS x (id)
            INNER JOIN erased AS e ON e.id = x.id
            WHERE s.started_at >= p_rows_since
            GROUP BY s.id
        ),
        writes AS (
            SELECT x.run_id, array_agg(f.text) AS texts
            FROM unnest(p_retired, p_texts) AS f (id, text)
            INNER JOIN ember.facts AS x ON x.id = f.id
            WHERE x.run_id IS NOT NULL
            GROUP BY x.run_id
        )
        SELECT s.id, s.generation_id, coalesce(reads.read_erased, '{}') AS read_erased,
            coalesce(reads.contents, '{}') || coalesce(writes.texts, '{}') AS quoted
        FROM ember.steward_runs AS s
        LEFT JOIN reads ON reads.run_id = s.id
        LEFT JOIN writes ON writes.run_id = s.id
        WHERE reads.run_id IS NOT NULL OR writes.run_id IS NOT NULL
    LOOP
        IF cardinality(r.read_erased) > 0 THEN
            WITH changed AS (
                UPDATE ember.messages AS x
                SET content = ember.forget_redact_lines(x.content, r.read_erased, '^m:(\d+) ', 'm:'),
                    blocks = ember.forget_redact_blocks(x.blocks, r.read_erased, '^m:(\d+) ', 'm:')
                WHERE x.thread_id = 'memory-steward' AND x.generation_id = r.generation_id
                    AND x.role = 'user' AND x.author = 'system' AND x.erased_by IS NULL
                RETURNING x.id
            )
            SELECT v_changed || coalesce(array_agg(changed.id), '{}') INTO v_changed FROM changed;
        END IF;
        v_needles := ember.forget_needles(r.quoted);
        CONTINUE WHEN cardinality(v_needles) = 0;
        FOR m IN
            SELECT x.id, x.content, x.blocks FROM ember.messages AS x
            WHERE x.thread_id = 'memory-steward' AND x.generation_id = r.generation_id AND x.role = 'assistant'
        LOOP
            SELECT * INTO v_content, v_blocks FROM ember.forget_redact_needles(m.content, m.blocks, v_needles);
            IF v_content IS DISTINCT FROM m.content OR v_blocks::text IS DISTINCT FROM m.blocks::text THEN
                UPDATE ember.messages SET content = v_content, blocks = v_blocks WHERE id = m.id;
                v_changed := v_changed || m.id;
            END IF;
        END LOOP;
    END LOOP;
    RETURN v_changed;
END;
$$;

-- The steward's record, second pass: search results that returned a forgotten fact (p_retired)
-- lose its lines. Returns the ids of the rows changed.
CREATE OR REPLACE FUNCTION ember.forget_steward_searches(p_retired bigint[], p_since timestamptz)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_changed bigint[] := '{}';
    m record;
    v_content text;
BEGIN
    IF cardinality(p_retired) > 0 THEN
        FOR m IN
            SELECT x.id, x.content FROM ember.messages AS x
            WHERE x.thread_id = 'memory-steward' AND x.role = 'tool_result' AND x.tool_name = 'search_memory'
                AND x.created_at >= p_since AND x.content ~ '(^|\n)fact \d+ \['
        LOOP
            v_content := ember.forget_redact_lines(m.content, p_retired, '^fact (\d+) \[', 'fact ');
            IF v_content IS DISTINCT FROM m.content THEN
                UPDATE ember.messages SET content = v_content WHERE id = m.id;
                v_changed := v_changed || m.id;
            END IF;
        END LOOP;
    END IF;
    RETURN v_changed;
END;
$$;

-- The steward's record, last pass: steward generations no run owns (the first, and any written by
-- hand) are searched for every text. Returns the ids of the rows changed.
CREATE OR REPLACE FUNCTION ember.forget_steward_unowned(
    p_contents text[], p_texts text[], p_since timestamptz, p_runs boolean
)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_changed bigint[] := '{}';
    v_unowned uuid[];
    v_all_needles text[];
    m record;
    v_content text;
    v_blocks json;
BEGIN
    v_unowned := ARRAY(
        SELECT g.id FROM ember.generations AS g
        WHERE g.thread_id = 'memory-steward' AND (g.ended_at IS NULL OR g.ended_at >= p_since)
            AND NOT (p_runs AND ember.steward_generation_has_run(g.id))
    );
    IF EXISTS (SELECT 1 FROM ember.messages AS x
               WHERE x.generation_id = ANY(v_unowned) AND x.created_at >= p_since AND x.erased_by IS NULL) THEN
        v_all_needles := ember.forget_needles(p_contents || p_texts);
        FOR m IN
            SELECT x.id, x.content, x.blocks FROM ember.messages AS x
            WHERE x.generation_id = ANY(v_unowned) AND x.created_at >= p_since AND x.erased_by IS NULL
        LOOP
            SELECT * INTO v_content, v_blocks FROM ember.forget_redact_needles(m.content, m.blocks, v_all_needles);
            IF v_content IS DISTINCT FROM m.content OR v_blocks::text IS DISTINCT FROM m.blocks::text THEN
                UPDATE ember.messages SET content = v_content, blocks = v_blocks WHERE id = m.id;
                v_changed := v_changed || m.id;
            END IF;
        END LOOP;
    END IF;
    RETURN v_changed;
END;
$$;

CREATE OR REPLACE FUNCTION ember.forget_steward_record(
    p_erased bigint[], p_contents text[], p_retired bigint[], p_texts text[],
    p_rows_since timestamptz, p_since timestamptz
)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_changed bigint[] := '{}';
    v_runs boolean := to_regclass('ember.steward_runs') IS NOT NULL;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = 'memory-steward') THEN
        RETURN v_changed;
    END IF;
    IF v_runs THEN
        v_changed := ember.forget_steward_runs(p_erased, p_contents, p_retired, p_texts, p_rows_since);
    END IF;
    v_changed := v_changed || ember.forget_steward_searches(p_retired, p_since)
        || ember.forget_steward_unowned(p_contents, p_texts, p_since, v_runs);
    RETURN ARRAY(SELECT DISTINCT i FROM unnest(v_changed) AS i ORDER BY i);
END;
$$;
