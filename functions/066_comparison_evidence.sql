-- Comparison, continued: each item's evidence as the rows it names (issue 24), for the analyst,
-- who reads no message: every row rendered by ember.render_row, as the models read it, bounded to
-- the setting analyst_row_chars; a row of an isolated thread named as isolated and nothing more.
-- The items themselves are in 064_comparison_items.sql.

-- comparison_item_evidence -----------------------------------------------------------------------

-- A proposal's evidence as pointers, whatever it holds: a rejected proposal's evidence was never
-- checked, so each element is read only if it has the shape the checks accept; anything else is a
-- malformed pointer, shown shortened as the JSON it is.
CREATE OR REPLACE FUNCTION ember.comparison_parse_pointers(p_evidence jsonb)
RETURNS TABLE (ordinal bigint, message_id bigint, generation_id uuid, malformed text)
LANGUAGE sql IMMUTABLE
AS $$
    SELECT e.ordinality,
           CASE WHEN e.ok_message THEN (e.value ->> 'message_id')::bigint END,
           CASE WHEN e.ok_generation THEN (e.value ->> 'generation_id')::uuid END,
           CASE WHEN NOT (e.ok_message OR e.ok_generation) THEN ember.shorten_to(e.value::text, 120) END
    FROM (
        SELECT x.value, x.ordinality,
               coalesce(jsonb_typeof(x.value) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(x.value)) = 1
                        AND ember.jsonb_is_count(x.value -> 'message_id'), false) AS ok_message,
               coalesce(jsonb_typeof(x.value) = 'object' AND (SELECT count(*) FROM jsonb_object_keys(x.value)) = 1
                        AND jsonb_typeof(x.value -> 'generation_id') = 'string'
                        AND x.value ->> 'generation_id'
                            ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', false) AS ok_generation
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_evidence) = 'array' THEN p_evidence
                                       ELSE jsonb_build_array(p_evidence) END)
            WITH ORDINALITY AS x (value, ordinality)
        WHERE p_evidence IS NOT NULL
    ) AS e
$$;

-- One pointer as the analyst sees it: the row it names rendered by ember.render_row, bounded by the
-- setting analyst_row_chars, or a generation described by its thread, ordinal and size. A row or
-- generation of an isolated thread is named as isolated and nothing else: not its thread, time,
-- role or text. target_found is false when the pointer names nothing.
CREATE OR REPLACE FUNCTION ember.comparison_render_pointer(
    p_message bigint,
    p_generation uuid,
    OUT target_found boolean,
    OUT isolated boolean,
    OUT thread_id text,
    OUT generation_ordinal integer,
    OUT seq bigint,
    OUT role text,
    OUT author text,
    OUT tool_status text,
    OUT at timestamptz,
    OUT forgotten boolean,
    OUT excerpt text
)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    m ember.messages;
    g ember.generations;
BEGIN
    target_found := false;
    isolated := false;
    IF p_message IS NOT NULL THEN
        SELECT * INTO m FROM ember.messages AS x WHERE x.id = p_message;
        IF m.id IS NULL THEN
            RETURN;
        END IF;
        target_found := true;
        IF ember.is_isolated(m.thread_id) THEN
            isolated := true;
            RETURN;
        END IF;
        SELECT x.ordinal INTO generation_ordinal FROM ember.generations AS x WHERE x.id = m.generation_id;
        thread_id := m.thread_id;
        seq := m.seq;
        role := m.role;
        author := m.author;
        tool_status := m.tool_status;
        at := m.created_at;
        forgotten := m.erased_by IS NOT NULL;
        excerpt := ember.render_row(m, ember.setting_int('analyst_row_chars'));
        RETURN;
    END IF;
    IF p_generation IS NULL THEN
        RETURN;
    END IF;
    SELECT * INTO g FROM ember.generations AS x WHERE x.id = p_generation;
    IF g.id IS NULL THEN
        RETURN;
    END IF;
    target_found := true;
    IF ember.is_isolated(g.thread_id) THEN
        isolated := true;
        RETURN;
    END IF;
    thread_id := g.thread_id;
    generation_ordinal := g.ordinal;
    at := g.started_at;
    excerpt := format(
        'generation #%s of %s, started %s, %s rows',
        g.ordinal, ember.render_escape(g.thread_id),
        to_char(g.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"'),
        (SELECT count(*) FROM ember.messages AS x WHERE x.generation_id = g.id)
    );
END;
$$;

-- The pointers of the items of a window (or of the ids given: p_fact_ids, p_proposal_ids; NULL for
-- all of the window), each rendered by comparison_render_pointer. unread_reason: for a fact's
-- pointer, why shadow could never have read that row (NULL when it could).
CREATE OR REPLACE FUNCTION ember.comparison_item_evidence(
    p_since timestamptz DEFAULT NULL,
    p_until timestamptz DEFAULT NULL,
    p_fact_ids bigint[] DEFAULT NULL,
    p_proposal_ids bigint[] DEFAULT NULL
)
RETURNS TABLE (
    item text,
    item_id bigint,
    ordinal bigint,
    message_id bigint,
    generation_id uuid,
    target_found boolean,
    isolated boolean,
    thread_id text,
    generation_ordinal integer,
    seq bigint,
    role text,
    author text,
    tool_status text,
    at timestamptz,
    forgotten boolean,
    excerpt text,
    unread_reason text,
    malformed text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH pointers AS (
        SELECT 'fact'::text AS item, fp.fact_id AS item_id, fp.ordinal::bigint AS ordinal, fp.message_id,
               fp.generation_id, fp.unread_reason, NULL::text AS malformed
        FROM ember.comparison_fact_pointers AS fp
        WHERE fp.fact_id IN (SELECT a.fact_id FROM ember.comparison_all_facts(p_since, p_until) AS a)
          AND (p_fact_ids IS NULL OR fp.fact_id = ANY (p_fact_ids))
          AND (p_proposal_ids IS NULL OR p_fact_ids IS NOT NULL)
        UNION ALL
        SELECT 'proposal', p.id, pp.ordinal, pp.message_id, pp.generation_id, NULL, pp.malformed
        FROM ember.comparison_window_proposals(p_since, p_until) AS p
        CROSS JOIN LATERAL ember.comparison_parse_pointers(p.evidence) AS pp
        WHERE (p_proposal_ids IS NULL OR p.id = ANY (p_proposal_ids))
          AND (p_fact_ids IS NULL OR p_proposal_ids IS NOT NULL)
    )
    SELECT x.item, x.item_id, x.ordinal, x.message_id, x.generation_id,
           r.target_found, r.isolated, r.thread_id, r.generation_ordinal, r.seq, r.role, r.author, r.tool_status,
           r.at, r.forgotten, r.excerpt, x.unread_reason, x.malformed
    FROM pointers AS x
    CROSS JOIN LATERAL ember.comparison_render_pointer(x.message_id, x.generation_id) AS r
    ORDER BY x.item, x.item_id, x.ordinal;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_item_evidence AS
SELECT * FROM ember.comparison_item_evidence(NULL, NULL);

COMMENT ON VIEW ember.comparison_item_evidence IS
'Every evidence pointer of every item of comparison_items, rendered as the row it names: item and item_id
(fact or proposal), ordinal, message_id or generation_id as the pointer has it; target_found (false: it
names nothing); isolated (true: a row of an isolated thread, named as such and nothing more); the row''s
thread_id, generation_ordinal, seq, role, author, tool_status and time (at; a generation''s start);
forgotten (the row was erased: the excerpt is its tombstone); excerpt: the row as ember.render_row renders it
for the models, bounded to the setting analyst_row_chars (240) characters with a marker saying how much was
cut, or a generation described; unread_reason: for a fact''s pointer, why shadow could never read that row;
malformed: a rejected proposal''s pointer that is not {"message_id": n} or {"generation_id": uuid}, as
shortened JSON. Windowed, or for chosen items: ember.comparison_item_evidence(since, until, fact_ids,
proposal_ids). No row of an isolated thread is ever rendered.';
