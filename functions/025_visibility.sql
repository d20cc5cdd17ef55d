-- Who may read which thread, and which fact (seed 001 sections 5 and 6, design.md invariants 1
-- and 9).
--
-- A viewer is named by text:
--   'human'            the person. Sees every thread, isolated ones included (labels and seals
--                      keep content from models, not from its owner). No thread may take this id.
--   a thread id        an automated viewer: the agent of that thread, whose pinned model
--                      (ember.threads.model) is what would read. 'memory-steward' is the steward.
--   anything else      EM029, and so is NULL: defaulting an unstated viewer to the person
--                      would turn a forgotten argument into a leak.
--
-- For an automated viewer, a thread other than its own is hidden when it is isolated; when it
-- is a label carrier (main), except to the steward; and whenever its current labels are not all
-- covered by the viewer model's tags: so the steward reads main only while main's current
-- generation labels are covered, and main otherwise waits like any category thread instead of
-- going to a downgraded model. The steward's own thread is hidden from every viewer and is left
-- out of every listing: it is the steward's record, and reading it back would have the steward
-- digest its own digest.

-- Thread ids: 'human' names the person as a viewer, 'memory-steward' the steward's record
-- (only ensure_steward_thread creates it); both are refused to anything else by name (EM016),
-- not by the raw check constraint. An id is also rendered in row headers (an event's source), so
-- it is an identifier: it starts with a letter or digit and holds only letters, digits and
-- "_", "-", ".", ":", "@" and "/", at most 128 characters (EM018).
CREATE OR REPLACE FUNCTION ember.is_safe_thread_id(p_id text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$ SELECT p_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$' $$;

CREATE OR REPLACE FUNCTION ember.threads_reserved_ids()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.id = 'human' THEN
        RAISE EXCEPTION 'thread id "human" is reserved: it names the person as a viewer'
            USING ERRCODE = 'EM016';
    END IF;
    IF new.id = 'memory-steward' AND new.kind IS DISTINCT FROM 'steward' THEN
        RAISE EXCEPTION 'thread id "memory-steward" is reserved for the memory steward''s record'
            USING ERRCODE = 'EM016', HINT = 'ensure_steward_thread() creates it; choose another id';
    END IF;
    IF NOT ember.is_safe_thread_id(new.id) THEN
        RAISE EXCEPTION 'thread id % is not an identifier', to_json(new.id)
            USING ERRCODE = 'EM018',
                  HINT = 'a letter or digit, then letters, digits, "_", "-", ".", ":", "@" or "/"; 128 at most';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_reserved_ids
BEFORE INSERT OR UPDATE OF id ON ember.threads
FOR EACH ROW EXECUTE FUNCTION ember.threads_reserved_ids();

-- A seal only tightens. Opening an isolated thread would hand every automated reader its whole
-- history at once, including rows forwarded or copied into it from other isolated threads under
-- the isolated-to-isolated rule; the person's way back is a new open thread with what they choose
-- to put in it. Sealing an open thread is honoured: every reader asks ember.is_isolated, and
-- shadow withdraws its work on the thread (functions/044_shadow_cancel.sql).
CREATE OR REPLACE FUNCTION ember.threads_seal_only_tightens()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF old.seal_tier = 'isolated' AND new.seal_tier IS DISTINCT FROM 'isolated' THEN
        RAISE EXCEPTION 'thread "%" is isolated and is never opened again (to %)',
            old.id, coalesce('"' || new.seal_tier || '"', 'none')
            USING ERRCODE = 'EM015',
                  HINT = 'start a new open thread with what may be read';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_seal_only_tightens
BEFORE UPDATE OF seal_tier ON ember.threads
FOR EACH ROW EXECUTE FUNCTION ember.threads_seal_only_tightens();

-- The tags of a viewer's model; empty when the viewer has no pinned model (or is unknown).
CREATE OR REPLACE FUNCTION ember.viewer_tags(p_tenant text, p_viewer text)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT m.tags FROM ember.threads AS t JOIN ember.models AS m ON m.id = t.model
         WHERE t.tenant_id = p_tenant AND t.id = p_viewer),
        '{}'
    )
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.viewer_tags(p_viewer text)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT ember.viewer_tags(ember.sole_tenant(), p_viewer)
$$;

-- Why p_thread is hidden from p_viewer, or NULL when it is visible. No validation: an unknown
-- or NULL viewer is treated as an automated viewer with no model, which sees the least. The
-- backlog view uses this directly so that it works before the steward thread exists.
CREATE OR REPLACE FUNCTION ember.hidden_reason_unchecked(p_tenant text, p_viewer text, p_thread text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_labels text[];
    v_missing text[];
BEGIN
    IF ember.is_steward_thread(p_tenant, p_thread) THEN
        RETURN format('"%s" is the memory steward''s record: highest classification, not an empty '
            'conversation; use search_memory for memories', p_thread);
    END IF;
    IF p_viewer = 'human' OR p_viewer = p_thread THEN
        RETURN NULL;
    END IF;
    IF ember.is_isolated(p_tenant, p_thread) THEN
        RETURN format('"%s" is isolated: nothing automated reads it', p_thread);
    END IF;
    IF ember.is_label_carrier(p_tenant, p_thread) AND NOT ember.is_steward_thread(p_tenant, p_viewer) THEN
        RETURN format('"%s" is a label carrier''s record: hidden from every automated viewer but '
            'the memory steward', p_thread);
    END IF;
    v_labels := ember.thread_call_labels(p_tenant, p_thread);
    v_missing := ARRAY(
        SELECT l FROM unnest(v_labels) AS l WHERE NOT l = ANY(ember.viewer_tags(p_tenant, p_viewer))
    );
    IF cardinality(v_missing) > 0 AND p_viewer IS NULL THEN
        RETURN format('"%s" carries %s, and there is no viewer whose model is tagged for %s',
            p_thread, v_labels, v_missing);
    ELSIF cardinality(v_missing) > 0 THEN
        RETURN format('"%s" carries %s; the model of viewer "%s" is not tagged for %s',
            p_thread, v_labels, p_viewer, v_missing);
    END IF;
    RETURN NULL;
END;
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (the backlog views).
CREATE OR REPLACE FUNCTION ember.hidden_reason_unchecked(p_viewer text, p_thread text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT ember.hidden_reason_unchecked(ember.sole_tenant(), p_viewer, p_thread)
$$;

-- Refuses an unknown viewer (EM029); see the top of this file for what a viewer is. A viewer is
-- a thread of the tenant named (or the person): another tenant's thread of that id is unknown.
CREATE OR REPLACE FUNCTION ember.check_viewer(p_tenant text, p_viewer text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_viewer IS NULL
       OR (p_viewer <> 'human'
           AND NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_viewer)) THEN
        RAISE EXCEPTION 'unknown viewer %', coalesce('"' || p_viewer || '"', 'NULL')
            USING ERRCODE = 'EM029',
                  HINT = 'a viewer is ''human'' (the person) or the id of the thread whose agent reads';
    END IF;
END;
$$;

-- The viewer function: why p_thread is hidden from p_viewer, NULL when visible.
CREATE OR REPLACE FUNCTION ember.thread_hidden_reason(p_tenant text, p_viewer text, p_thread text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM ember.check_viewer(p_tenant, p_viewer);
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_thread) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    RETURN ember.hidden_reason_unchecked(p_tenant, p_viewer, p_thread);
END;
$$;

CREATE OR REPLACE FUNCTION ember.thread_visible(p_tenant text, p_viewer text, p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$ SELECT ember.thread_hidden_reason(p_tenant, p_viewer, p_thread) IS NULL $$;

-- Whether a fact may be read: never when it is derived from an isolated thread (one sealed after
-- the fact was written) and, unless the viewer is the person, only when the viewer model's tags
-- cover its labels. Written over plain values so search_memory can apply it per candidate
-- without looking the viewer up again.
CREATE OR REPLACE FUNCTION ember.fact_visible(
    p_tenant text, p_human boolean, p_tags text[], p_categories text[], p_sources text[]
)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT (p_human OR p_categories <@ p_tags)
        AND NOT EXISTS (SELECT 1 FROM unnest(p_sources) AS s WHERE ember.is_isolated(p_tenant, s))
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.fact_visible(
    p_human boolean, p_tags text[], p_categories text[], p_sources text[]
)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT ember.fact_visible(ember.sole_tenant(), p_human, p_tags, p_categories, p_sources)
$$;

-- Why a fact is hidden from a viewer, or NULL when the viewer may read it (ember.fact_visible).
CREATE OR REPLACE FUNCTION ember.fact_hidden_reason(p_viewer text, f ember.facts)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM unnest(f.source_threads) AS s WHERE ember.is_isolated(f.tenant_id, s))
            THEN 'derived from an isolated thread'
        WHEN NOT ember.fact_visible(
                f.tenant_id, p_viewer = 'human', ember.viewer_tags(f.tenant_id, p_viewer), f.categories, '{}'
            )
            THEN 'labelled beyond the viewer''s model'
    END
$$;

-- The "all threads" listing (sidebar, pickers, references): the threads the viewer may see.
-- The steward's thread is never listed, not even for the person.
CREATE OR REPLACE FUNCTION ember.list_threads(p_tenant text, p_viewer text)
RETURNS TABLE (
    id text, kind text, title text, category text, seal_tier text, status text,
    model text, labels text[], created_at timestamptz
)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM ember.check_viewer(p_tenant, p_viewer);
    RETURN QUERY
    SELECT t.id, t.kind, t.title, t.category, t.seal_tier, t.status, t.model,
        ember.thread_call_labels(t.tenant_id, t.id), t.created_at
    FROM ember.threads AS t
    WHERE t.tenant_id = p_tenant
      AND NOT ember.is_steward_thread(t.tenant_id, t.id)
      AND ember.hidden_reason_unchecked(t.tenant_id, p_viewer, t.id) IS NULL
    ORDER BY t.created_at, t.id;
END;
$$;

-- Recent rows of a thread, oldest first, for a viewer. Refusals: EM027 for the steward's
-- record (for every viewer, with the honest reason the seed asks for); otherwise, for an
-- automated viewer, one EM028 that says only that no thread of that id is readable by it, the
-- same for an unknown thread, an isolated one, one hidden by labels, and one whose returned rows
-- belong to a generation whose labels the viewer's model is not tagged for (an older generation
-- may be wider than the current one). A refusal that named the labels, or said "isolated",
-- would tell the agent what it may not know; thread_hidden_reason gives the operator the detail.
-- The person ('human') gets EM001 for an unknown thread and sees everything else.
-- An automated viewer reports the generations it read (report_read_generations): its current
-- generation's labels grow by theirs, so its next rows carry them.
CREATE OR REPLACE FUNCTION ember.read_thread(
    p_tenant text, p_viewer text, p_thread text, p_limit int DEFAULT 50
)
RETURNS TABLE (
    id bigint, seq bigint, generation_id uuid, role text, author text, content text,
    blocks json, tool_call_id text, tool_name text, tool_status text, from_thread text,
    categories text[], created_at timestamptz
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids bigint[];
    v_automated boolean;
BEGIN
    PERFORM ember.check_viewer(p_tenant, p_viewer);
    v_automated := p_viewer <> 'human' AND p_viewer IS DISTINCT FROM p_thread;
    IF ember.is_steward_thread(p_tenant, p_thread) THEN
        RAISE EXCEPTION 'read_thread: %', ember.hidden_reason_unchecked(p_tenant, p_viewer, p_thread)
            USING ERRCODE = 'EM027',
                  HINT = 'memories are found with ember.search_memory(tenant, viewer, query): facts, with their evidence, that the viewer may read';
    END IF;
    IF NOT v_automated AND NOT EXISTS (
        SELECT 1 FROM ember.threads WHERE ember.threads.tenant_id = p_tenant AND ember.threads.id = p_thread
    ) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    IF v_automated AND (
        NOT EXISTS (
            SELECT 1 FROM ember.threads WHERE ember.threads.tenant_id = p_tenant AND ember.threads.id = p_thread
        )
        OR ember.hidden_reason_unchecked(p_tenant, p_viewer, p_thread) IS NOT NULL
    ) THEN
        RAISE EXCEPTION 'read_thread: no thread "%" is readable by viewer "%"', p_thread, p_viewer
            USING ERRCODE = 'EM028';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'read_thread: the limit must be positive, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'EM012';
    END IF;

    v_ids := ARRAY(
        SELECT m.id FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.thread_id = p_thread
        ORDER BY m.seq DESC LIMIT p_limit
    );
    IF v_automated THEN
        IF EXISTS (
            SELECT 1 FROM ember.messages AS m
            INNER JOIN ember.generations AS g ON g.tenant_id = m.tenant_id AND g.id = m.generation_id
            WHERE m.tenant_id = p_tenant AND m.id = ANY(v_ids) AND NOT g.labels <@ ember.viewer_tags(p_tenant, p_viewer)
        ) THEN
            RAISE EXCEPTION 'read_thread: no thread "%" is readable by viewer "%"', p_thread, p_viewer
                USING ERRCODE = 'EM028';
        END IF;
        PERFORM ember.report_read_generations(
            ember.current_generation(p_tenant, p_viewer),
            ARRAY(SELECT DISTINCT m.generation_id FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(v_ids))
        );
    END IF;

    RETURN QUERY
    SELECT m.id, m.seq, m.generation_id, m.role, m.author, m.content, m.blocks, m.tool_call_id,
        m.tool_name, m.tool_status, m.from_thread, m.categories, m.created_at
    FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(v_ids)
    ORDER BY m.seq;
END;
$$;

-- The steward of a tenant as the backlog sees it, always one row: its thread (NULL columns before
-- ensure_steward_thread), its model, the tags it may read, and whether they cover every category
-- (then no thread is hidden from it by labels and no row waits for a tag).
CREATE OR REPLACE FUNCTION ember.backlog_viewer(p_tenant text)
RETURNS TABLE (id text, created_at timestamptz, model text, tags text[], all_tagged boolean)
LANGUAGE sql STABLE
AS $$
    SELECT
        s.id,
        s.created_at,
        s.model,
        coalesce(s.tags, '{}'),
        s.id IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM ember.categories AS c
            WHERE NOT ARRAY[c.name] <@ coalesce(s.tags, '{}')
        )
    FROM (VALUES (1)) AS one (n)
    LEFT JOIN (
        SELECT t.id, t.created_at, coalesce(t.model, 'none pinned') AS model,
            ember.viewer_tags(t.tenant_id, t.id) AS tags
        FROM ember.threads AS t
        WHERE t.tenant_id = p_tenant AND t.id = ember.steward_thread_id(p_tenant)
    ) AS s ON one.n = 1
$$;

-- The one-tenant form, kept for databases whose views still read it while they upgrade.
CREATE OR REPLACE FUNCTION ember.backlog_viewer()
RETURNS TABLE (id text, created_at timestamptz, model text, tags text[], all_tagged boolean)
LANGUAGE sql STABLE
AS $$
    SELECT * FROM ember.backlog_viewer(ember.sole_tenant())
$$;

-- The undigested rows of one tenant that its steward may read now. Left out: the steward's own
-- thread, isolated threads, threads hidden from the steward, rows of a generation whose labels
-- its model is not tagged for (they wait: see steward_backlog_waiting; the generation's set, not
-- the row's stamp, because reading a row reports its whole generation read), and main's rows
-- from before the steward thread was created: strictly before or at that instant (a main row
-- written at exactly the creation time is out of both, as in the seed's `created_at >` predicate).
-- Main's rows from before then were the old in-main steward's own tool traffic, not
-- conversation: they are never fed back. With no steward thread yet, no row of main is in the
-- backlog (there is no creation time to start from, and reading main from its beginning would
-- re-read that traffic); other threads' rows are listed as a steward without a model would
-- see them, i.e. only unlabelled ones. Create the steward thread (ensure_steward_thread) when
-- the system starts, before main takes any conversation that should be remembered.
--
-- Cost: O(the tenant's undigested rows), however many threads, tenants and digested rows the
-- history holds. The tenant's threads with undigested rows are found through the partial index
-- messages_undigested (tenant_id first), the per-thread rules are evaluated once per such thread
-- (MATERIALIZED: inlined, the planner would evaluate them once per row), and the rows are then
-- read through the same index. When the steward exists and its model is tagged for every
-- category there is, no thread can be hidden from it by labels (labels are categories), so
-- hidden_reason_unchecked is not asked at all.
CREATE OR REPLACE FUNCTION ember.steward_backlog(p_tenant text)
RETURNS TABLE (
    id bigint,
    seq bigint,
    thread_id text,
    generation_id uuid,
    role text,
    author text,
    content text,
    blocks json,
    tool_call_id text,
    tool_name text,
    tool_status text,
    from_thread text,
    categories text[],
    created_at timestamptz
)
LANGUAGE sql STABLE
AS $$
    WITH viewer AS MATERIALIZED (
        SELECT
            v.id,
            v.created_at,
            v.tags,
            v.all_tagged
        FROM ember.backlog_viewer(p_tenant) AS v
    ),

    undigested AS MATERIALIZED (
        SELECT DISTINCT m.thread_id AS id
        FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.episode_id IS NULL
    ),

    readable AS MATERIALIZED (
        SELECT
            u.id,
            ember.is_label_carrier(p_tenant, u.id) AS carrier,
            ember.cutover_from_seq(p_tenant, u.id) AS cutover_from
        FROM undigested AS u
        CROSS JOIN viewer AS v
        WHERE
            NOT ember.is_steward_thread(p_tenant, u.id)
            AND NOT ember.is_isolated(p_tenant, u.id)
            AND (v.all_tagged OR ember.hidden_reason_unchecked(p_tenant, v.id, u.id) IS NULL)
    )

    SELECT
        m.id,
        m.seq,
        m.thread_id,
        m.generation_id,
        m.role,
        m.author,
        m.content,
        m.blocks,
        m.tool_call_id,
        m.tool_name,
        m.tool_status,
        m.from_thread,
        m.categories,
        m.created_at
    FROM readable AS r
    INNER JOIN ember.messages AS m ON m.tenant_id = p_tenant AND r.id = m.thread_id
    INNER JOIN ember.generations AS g ON g.tenant_id = p_tenant AND m.generation_id = g.id
    CROSS JOIN viewer AS v
    WHERE
        m.episode_id IS NULL
        AND g.labels <@ v.tags
        AND (NOT r.carrier OR m.created_at > v.created_at)
        -- A cut-over thread's tail is shadow's (024_cutover_scope.sql), not undigested work.
        AND (r.cutover_from IS NULL OR m.seq <= r.cutover_from)
$$;

-- Every tenant's backlog, for analysts: steward_backlog of each, its tenant in the last column.
CREATE OR REPLACE VIEW ember.backlog AS
SELECT
    b.id,
    b.seq,
    b.thread_id,
    b.generation_id,
    b.role,
    b.author,
    b.content,
    b.blocks,
    b.tool_call_id,
    b.tool_name,
    b.tool_status,
    b.from_thread,
    b.categories,
    b.created_at,
    t.id AS tenant_id
FROM ember.tenants AS t
CROSS JOIN LATERAL ember.steward_backlog(t.id) AS b;

-- Undigested work of one tenant that waits for a tagged model, and why: the "says why" of
-- invariant 9. One row per thread whose undigested rows are kept out of the backlog only by
-- labels (never an isolated thread, the steward's own, or main's rows from before the steward
-- existed).
--
-- A row waits when it is undigested, its thread is one the backlog could read (not the steward's,
-- not isolated, for a carrier only rows after the steward existed), and it is not in the backlog:
-- its thread is hidden from the steward, or its labels are not all tagged on the steward's model.
-- That is decided from the same per-thread rules as the backlog, row by row, in one pass over the
-- undigested rows: never an anti-join against the backlog, which the planner could turn into a
-- nested loop over two sets of undigested rows. With a steward whose model is tagged for every
-- category, nothing waits: no thread is hidden from it and every row's labels are tagged. Then no
-- undigested row is looked at.
CREATE OR REPLACE FUNCTION ember.steward_backlog_waiting(p_tenant text)
RETURNS TABLE (thread_id text, waiting_rows integer, labels text[], reason text)
LANGUAGE sql STABLE
AS $$
    WITH viewer AS MATERIALIZED (
        SELECT
            v.id,
            v.created_at,
            v.model,
            v.tags
        FROM ember.backlog_viewer(p_tenant) AS v
        WHERE NOT v.all_tagged
    ),

    undigested AS MATERIALIZED (
        SELECT DISTINCT m.thread_id AS id
        FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.episode_id IS NULL AND EXISTS (SELECT 1 FROM viewer)
    ),

    candidates AS MATERIALIZED (
        SELECT
            u.id,
            ember.is_label_carrier(p_tenant, u.id) AS carrier,
            ember.hidden_reason_unchecked(p_tenant, v.id, u.id) AS hidden,
            ember.cutover_from_seq(p_tenant, u.id) AS cutover_from
        FROM undigested AS u
        CROSS JOIN viewer AS v
        WHERE
            NOT ember.is_steward_thread(p_tenant, u.id)
            AND NOT ember.is_isolated(p_tenant, u.id)
    ),

    pending AS (
        SELECT
            m.thread_id,
            m.id,
            g.labels AS categories,
            c.hidden
        FROM candidates AS c
        INNER JOIN ember.messages AS m ON m.tenant_id = p_tenant AND c.id = m.thread_id
        INNER JOIN ember.generations AS g ON g.tenant_id = p_tenant AND m.generation_id = g.id
        CROSS JOIN viewer AS v
        WHERE
            m.episode_id IS NULL
            AND (NOT c.carrier OR m.created_at > v.created_at)
            AND (c.cutover_from IS NULL OR m.seq <= c.cutover_from)
            AND NOT (c.hidden IS NULL AND g.labels <@ v.tags)
    )

    SELECT
        p.thread_id,
        count(DISTINCT p.id)::integer AS waiting_rows,
        ember.label_set(array_agg(c.label) || ember.thread_call_labels(p_tenant, p.thread_id)) AS labels,
        coalesce(
            p.hidden,
            format('rows carry labels the steward''s model (%s) is not tagged for', coalesce(v.model, 'none'))
        ) AS reason
    FROM pending AS p
    LEFT JOIN LATERAL unnest(p.categories) AS c (label) ON TRUE
    CROSS JOIN viewer AS v
    GROUP BY p.thread_id, p.hidden, v.model
$$;

-- Every tenant's waiting work, for analysts and ember status, its tenant in the last column.
CREATE OR REPLACE VIEW ember.backlog_waiting AS
SELECT
    w.thread_id,
    w.waiting_rows,
    w.labels,
    w.reason,
    t.id AS tenant_id
FROM ember.tenants AS t
CROSS JOIN LATERAL ember.steward_backlog_waiting(t.id) AS w;
