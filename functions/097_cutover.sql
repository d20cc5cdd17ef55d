-- Cut-over (issue 25, item 1; seed 000 section 6, "compare first, then decide whether to switch";
-- seed 001 section 8, shadow threads replacing the steward): an operator gives a scope of threads
-- to shadow from now on, and can take it back.
--
--   cut_over(scope, value)       from the global max(seq) on, the scope's rows are shadow's: the
--                                steward's backlog stops there (024_cutover_scope.sql), and each
--                                valid proposal that cites only such rows becomes a fact
--   cutover_promote(proposal)    the promotion, run by a trigger as each proposal is stored: the
--                                evidence is checked again as the steward's would be, never
--                                trusted from the proposal row
--   cutover_rollback(scope, ...) the scope's rows from the cut-over point go back to the steward's
--                                backlog, and exactly the facts the promotion wrote are retired,
--                                except those the steward confirmed meanwhile
--   cutover_plan(scope, ...)     the dry run of either, with the comparison's numbers for the scope
--
-- Why the boundary is the global max(seq) at the cut-over rather than shadow's read position: no
-- row above it existed, so no steward run can have read one (nothing digested twice), and every
-- row of the scope at or below it stays in the steward's backlog until the steward digests it
-- (nothing skipped), however far behind either pipeline is. Shadow's own cursor is untouched
-- (invariant 5): it reads the rows above the point as it would anyway.
-- Why a rollback ends the cut-over as a whole instead of closing it at the rollback's seq: the
-- facts from the window are retired, so the window's rows must be read again by someone, and the
-- steward is the one left.

-- The threads a scope names now (never one shadow does not read), for the dry run and rollback.
CREATE OR REPLACE FUNCTION ember.cutover_scope_threads(p_scope text, p_value text)
RETURNS SETOF text
LANGUAGE sql STABLE
AS $$
    SELECT t.id FROM ember.threads AS t
    WHERE (p_scope = 'all'
           OR (p_scope = 'thread' AND t.id = p_value)
           OR (p_scope = 'category' AND t.category = p_value))
        AND NOT ember.shadow_excluded(t.tenant_id, t.id)
    ORDER BY t.id
$$;

-- EM120 unless the scope names something that can be cut over. A rollback (p_rollback) asks only
-- that the scope is well formed: a thread sealed since its cut-over can still be given back, since
-- a rollback retires facts and reads nothing.
DROP FUNCTION IF EXISTS ember.cutover_check_scope(text, text);
CREATE OR REPLACE FUNCTION ember.cutover_check_scope(p_scope text, p_value text, p_rollback boolean DEFAULT FALSE)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_scope IS NULL OR p_scope NOT IN ('thread', 'category', 'all') THEN
        RAISE EXCEPTION 'cut-over scope must be thread, category or all, got %', coalesce(p_scope, 'none')
            USING ERRCODE = 'EM120';
    END IF;
    IF (p_scope = 'all') <> (p_value IS NULL) THEN
        RAISE EXCEPTION 'cut-over scope %: %', p_scope,
            CASE WHEN p_scope = 'all' THEN 'takes no value' ELSE 'needs a ' || p_scope || ' name' END
            USING ERRCODE = 'EM120';
    END IF;
    IF p_rollback THEN
        RETURN;
    END IF;
    IF p_scope = 'thread' THEN
        IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = p_value) THEN
            RAISE EXCEPTION 'cut-over scope thread "%": no such thread', p_value USING ERRCODE = 'EM120';
        END IF;
        IF ember.shadow_excluded(ember.sole_tenant(), p_value) THEN
            RAISE EXCEPTION 'cut-over scope thread "%": shadow never reads it (main, the steward''s record '
                'or an isolated thread), so the steward keeps it', p_value
                USING ERRCODE = 'EM120';
        END IF;
    ELSIF p_scope = 'category' AND NOT EXISTS (SELECT 1 FROM ember.categories WHERE name = p_value) THEN
        RAISE EXCEPTION 'cut-over scope category "%": no such category', p_value USING ERRCODE = 'EM120';
    END IF;
END;
$$;

-- The active cut-over whose scope overlaps the given one, or NULL.
CREATE OR REPLACE FUNCTION ember.cutover_overlap(p_scope text, p_value text)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT c.id FROM ember.cutovers AS c
    WHERE c.rolled_back_at IS NULL
        AND (c.scope = 'all' OR p_scope = 'all'
             OR (c.scope = p_scope AND c.scope_value = p_value)
             OR (c.scope = 'category' AND p_scope = 'thread'
                 AND c.scope_value = (SELECT t.category FROM ember.threads AS t WHERE t.id = p_value))
             OR (c.scope = 'thread' AND p_scope = 'category'
                 AND (SELECT t.category FROM ember.threads AS t WHERE t.id = c.scope_value) = p_value))
    ORDER BY c.id
    LIMIT 1
$$;

CREATE OR REPLACE FUNCTION ember.cutover_active(p_scope text, p_value text)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT c.id FROM ember.cutovers AS c
    WHERE c.rolled_back_at IS NULL AND c.scope = p_scope AND c.scope_value IS NOT DISTINCT FROM p_value
$$;

-- The comparison's numbers for the threads of a scope, summed over comparison_by_thread.
CREATE OR REPLACE FUNCTION ember.cutover_comparison(p_threads text[])
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'facts', coalesce(sum(b.facts), 0),
        'proposals', coalesce(sum(b.proposals), 0),
        'rejected_proposals', coalesce(sum(b.rejected_proposals), 0),
        'exact_covered_facts', coalesce(sum(b.exact_covered_facts), 0),
        'evidence_neighbour_facts', coalesce(sum(b.evidence_neighbour_facts), 0),
        'semantic_covered_facts', coalesce(sum(b.semantic_covered_facts), 0),
        'steward_only_facts', coalesce(sum(b.steward_only_facts), 0),
        'shadow_only_proposals', coalesce(sum(b.shadow_only_proposals), 0),
        'exact_coverage', CASE WHEN sum(b.facts) > 0 THEN round(sum(b.exact_covered_facts) / sum(b.facts), 3) END,
        'evidence_coverage', CASE WHEN sum(b.facts) > 0
                                  THEN round(sum(b.evidence_neighbour_facts) / sum(b.facts), 3) END,
        'semantic_coverage', CASE WHEN sum(b.facts) > 0
                                  THEN round(sum(b.semantic_covered_facts) / sum(b.facts), 3) END,
        'shadow_runs', coalesce(sum(b.shadow_runs), 0),
        'shadow_usd', sum(b.shadow_usd)
    )
    FROM ember.comparison_by_thread(NULL, NULL) AS b
    WHERE b.thread_id = ANY(p_threads)
$$;

-- The facts a rollback of cut-over p_cutover takes back, the one rule of an exact inverse, which
-- the rollback, its dry run and explain_fact read: each fact the promotion wrote that the steward
-- did not confirm, wherever it is now (active, superseded, merged), and each fact a merge made
-- from one of them, transitively (a merge of a merge). A confirmed promoted fact stays: the
-- steward holds it on evidence of its own. via is the taken-back fact that brought a merge in.
CREATE OR REPLACE FUNCTION ember.cutover_taken_back(p_cutover bigint)
RETURNS TABLE (fact_id bigint, via bigint)
LANGUAGE sql STABLE
AS $$
    WITH RECURSIVE t (fact_id, via) AS (
        SELECT f.id, NULL::bigint FROM ember.facts AS f
        WHERE f.cutover_id = p_cutover AND f.status IN ('active', 'superseded', 'merged')
            AND NOT EXISTS (SELECT 1 FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)
        UNION
        SELECT f.merged_into, t.fact_id FROM t
        INNER JOIN ember.facts AS f ON f.id = t.fact_id
        WHERE f.status = 'merged'
    )
    SELECT DISTINCT ON (t.fact_id) t.fact_id, t.via FROM t ORDER BY t.fact_id, t.via NULLS FIRST
$$;

-- What a cut-over (p_rollback false) or a rollback (true) of the scope would change, without
-- changing it: the threads, the rows each pipeline then reads, the facts a rollback retires and
-- keeps, and the comparison's numbers for the scope. refused names why the real call would fail.
CREATE OR REPLACE FUNCTION ember.cutover_plan(
    p_scope text, p_value text DEFAULT NULL, p_rollback boolean DEFAULT FALSE,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
AS $$
DECLARE
    v_threads text[];
    v_active bigint;
    v_overlap bigint;
    c ember.cutovers;
    v_refused text;
    v_from bigint;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.cutover_check_scope(p_scope, p_value, p_rollback);
    v_threads := ARRAY(SELECT ember.cutover_scope_threads(p_scope, p_value));
    v_active := ember.cutover_active(p_scope, p_value);
    SELECT * INTO c FROM ember.cutovers WHERE id = v_active;
    IF p_rollback THEN
        IF v_active IS NULL THEN
            v_refused := 'no active cut-over of this scope';
        END IF;
        v_from := c.from_seq;
    ELSE
        v_overlap := ember.cutover_overlap(p_scope, p_value);
        IF v_overlap IS NOT NULL THEN
            v_refused := format('cut-over %s already covers this scope', v_overlap);
        ELSIF NOT EXISTS (SELECT 1 FROM ember.shadow_activation) THEN
            v_refused := 'shadow is not activated';
        END IF;
        v_from := (SELECT coalesce(max(m.seq), 0) FROM ember.messages AS m);
    END IF;

    RETURN jsonb_build_object(
        'action', CASE WHEN p_rollback THEN 'rollback' ELSE 'cut-over' END,
        'scope', p_scope,
        'value', p_value,
        'cutover_id', v_active,
        'refused', v_refused,
        'from_seq', v_from,
        'threads', to_jsonb(v_threads),
        -- Rows of the scope the steward has not digested and still reads (at or before the point).
        'steward_rows_to_digest', (
            SELECT count(*) FROM ember.messages AS m
            WHERE m.thread_id = ANY(v_threads) AND m.episode_id IS NULL AND m.seq <= v_from
        ),
        -- Rows of the scope above the point: shadow's while cut over; a rollback returns the
        -- undigested ones to the steward.
        'rows_after_point', (
            SELECT count(*) FROM ember.messages AS m
            WHERE m.thread_id = ANY(v_threads) AND m.seq > v_from
        ),
        'promotions', CASE WHEN v_active IS NOT NULL THEN (
            SELECT jsonb_build_object(
                'promoted', count(*) FILTER (WHERE p.outcome = 'promoted'),
                'already_stated', count(*) FILTER (WHERE p.outcome = 'already-stated'),
                'refused', count(*) FILTER (WHERE p.outcome = 'refused'))
            FROM ember.cutover_promotions AS p WHERE p.cutover_id = v_active
        ) END,
        'facts_to_retire', CASE WHEN p_rollback AND v_active IS NOT NULL THEN (
            SELECT coalesce(jsonb_agg(t.fact_id ORDER BY t.fact_id), '[]') FROM ember.cutover_taken_back(v_active) AS t
        ) END,
        'facts_to_reopen', CASE WHEN p_rollback AND v_active IS NOT NULL THEN (
            SELECT coalesce(jsonb_agg(DISTINCT f.id ORDER BY f.id), '[]') FROM ember.facts AS f
            INNER JOIN ember.cutover_taken_back(v_active) AS t
                ON f.merged_into = t.fact_id OR f.superseded_by = t.fact_id
            WHERE f.status IN ('merged', 'superseded')
                AND NOT EXISTS (SELECT 1 FROM ember.cutover_taken_back(v_active) AS x WHERE x.fact_id = f.id)
        ) END,
        'facts_to_keep', CASE WHEN p_rollback AND v_active IS NOT NULL THEN (
            SELECT coalesce(jsonb_agg(f.id ORDER BY f.id), '[]') FROM ember.facts AS f
            WHERE f.cutover_id = v_active AND f.status = 'active'
                AND EXISTS (SELECT 1 FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)
        ) END,
        'comparison', ember.cutover_comparison(v_threads)
    );
END;
$$;

-- cut_over, cutover_rollback and cutover_plan run as their owner (SECURITY DEFINER) and are
-- granted to no Ember role: the operator (the owner) calls them, and a DBA who wants an analyst to
-- decide grants EXECUTE on these three to that login role alone (docs/cutover.md). A new role
-- would have to be created by every installation for a decision most leave to the owner.
--
-- Cut over a scope now. Refused: a bad scope (EM120), shadow not activated (EM121), a scope an
-- active cut-over already covers in part or whole (EM122).
CREATE OR REPLACE FUNCTION ember.cut_over(
    p_scope text, p_value text DEFAULT NULL, p_by text DEFAULT session_user, p_note text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    v_overlap bigint;
    c ember.cutovers;
    v_plan jsonb;
    v_point_at timestamptz;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.cutover_check_scope(p_scope, p_value);
    IF p_by IS NULL OR btrim(p_by) = '' THEN
        RAISE EXCEPTION 'a cut-over names who made it' USING ERRCODE = 'EM120';
    END IF;
    -- One cut-over or rollback at a time, so the overlap check below sees every other one.
    PERFORM pg_advisory_xact_lock(hashtext('ember.cutover'));
    -- The steward's claim holds its thread's row while it reads the backlog: waiting for it here
    -- means no claim reads the backlog across the point (a claim that started before reads only
    -- rows at or below it; one after sees the cut-over).
    PERFORM 1 FROM ember.threads AS t WHERE ember.is_steward_thread(t.id) FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM ember.shadow_activation) THEN
        RAISE EXCEPTION 'cut-over: shadow is not activated, so nothing would read the scope''s new rows'
            USING ERRCODE = 'EM121', HINT = 'run ember.shadow_activate() first';
    END IF;
    v_overlap := ember.cutover_overlap(p_scope, p_value);
    IF v_overlap IS NOT NULL THEN
        RAISE EXCEPTION 'cut-over of % %: cut-over % already covers it', p_scope, coalesce(p_value, ''), v_overlap
            USING ERRCODE = 'EM122', HINT = 'roll that cut-over back first';
    END IF;
    -- The time the operator gives is the point's: never before the row at the point, nor before
    -- the thread it names was created. Who and when the database saw fill recorded_by and
    -- recorded_at by themselves.
    SELECT m.created_at INTO v_point_at FROM ember.messages AS m ORDER BY m.seq DESC LIMIT 1;
    IF p_now < v_point_at
       OR p_now < (SELECT t.created_at FROM ember.threads AS t WHERE p_scope = 'thread' AND t.id = p_value) THEN
        RAISE EXCEPTION 'cut-over at %: before the rows it follows (the last written at %)', p_now,
            greatest(v_point_at, (SELECT t.created_at FROM ember.threads AS t WHERE p_scope = 'thread' AND t.id = p_value))
            USING ERRCODE = 'EM120', HINT = 'omit p_now for the clock';
    END IF;
    v_plan := ember.cutover_plan(p_scope, p_value, false, p_now);
    INSERT INTO ember.cutovers (scope, scope_value, from_seq, from_at, created_by, note)
    VALUES (p_scope, p_value, (SELECT coalesce(max(m.seq), 0) FROM ember.messages AS m), p_now, p_by, p_note)
    RETURNING * INTO c;
    RETURN v_plan || jsonb_build_object('cutover_id', c.id, 'from_seq', c.from_seq, 'from_at', c.from_at);
END;
$$;

-- Roll a scope's cut-over back. Refused (EM123) when the scope has no active cut-over.
CREATE OR REPLACE FUNCTION ember.cutover_rollback(
    p_scope text, p_value text DEFAULT NULL, p_by text DEFAULT session_user,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
AS $$
DECLARE
    c ember.cutovers;
    v_threads text[];
    v_retired bigint[];
    v_kept bigint[];
    v_taken bigint[];
    v_returned bigint;
    v_result jsonb;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.cutover_check_scope(p_scope, p_value, true);
    IF p_by IS NULL OR btrim(p_by) = '' THEN
        RAISE EXCEPTION 'a rollback names who made it' USING ERRCODE = 'EM120';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('ember.cutover'));
    -- FOR UPDATE: a promotion in flight holds this row FOR SHARE; waiting for it means its fact
    -- is seen below and retired, and any later promotion finds the cut-over rolled back.
    SELECT * INTO c FROM ember.cutovers
    WHERE id = ember.cutover_active(p_scope, p_value)
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rollback of % %: no active cut-over of this scope', p_scope, coalesce(p_value, '')
            USING ERRCODE = 'EM123';
    END IF;
    v_threads := ARRAY(SELECT ember.cutover_scope_threads(p_scope, p_value));

    IF p_now < c.from_at THEN
        RAISE EXCEPTION 'rollback of cut-over % at %: before the cut-over itself (%)', c.id, p_now, c.from_at
            USING ERRCODE = 'EM120', HINT = 'omit p_now for the clock';
    END IF;
    v_kept := ARRAY(
        SELECT f.id FROM ember.facts AS f
        WHERE f.cutover_id = c.id AND f.status = 'active'
            AND EXISTS (SELECT 1 FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)
        ORDER BY f.id
    );
    -- The exact inverse (ember.cutover_taken_back): every fact the window brought, wherever it is
    -- now, and every merge that took one in. First the other sources of those merges are split
    -- back out, each re-checked against the evidence it has left (check_evidence, as forgetting
    -- re-checks): still justified, active again as before the merge; not, retired. Then the
    -- taken-back facts are retired together, and fact_reopen_closed (099_fact_valid_time.sql)
    -- reopens what any of them had superseded. Every change is a history row naming the cut-over.
    v_taken := ARRAY(SELECT t.fact_id FROM ember.cutover_taken_back(c.id) AS t ORDER BY t.fact_id);
    PERFORM set_config('ember.cutover', c.id::text, true);
    PERFORM set_config('ember.history_reason',
                       format('cut-over %s rolled back: the merge it was part of stood on a promoted fact', c.id), true);
    UPDATE ember.facts AS s
    SET status = CASE WHEN k.justified THEN 'active' ELSE 'retired' END,
        merged_into = NULL,
        retired_reason = CASE WHEN NOT k.justified
                              THEN format('cut-over %s rolled back: out of its merge, its own evidence no longer supports it', c.id) END,
        updated_at = p_now
    FROM (
        SELECT x.id,
            EXISTS (SELECT 1 FROM ember.fact_evidence AS e WHERE e.fact_id = x.id)
            AND ember.check_evidence(NULL, x.evidence_kind, ember.facts_evidence_union(ARRAY[x.id]), false) IS NULL
                AS justified
        FROM ember.facts AS x
        WHERE x.status = 'merged' AND x.merged_into = ANY(v_taken) AND NOT (x.id = ANY(v_taken)) AND x.text IS NOT NULL
    ) AS k
    WHERE s.id = k.id;
    PERFORM set_config('ember.history_reason', '', true);
    WITH r AS (
        UPDATE ember.facts AS f
        SET status = 'retired', merged_into = NULL, superseded_by = NULL,
            retired_reason = CASE WHEN f.cutover_id = c.id THEN format('cut-over %s rolled back', c.id)
                                  ELSE format('cut-over %s rolled back: merged from a fact it promoted', c.id) END,
            updated_at = p_now
        WHERE f.id = ANY(v_taken) AND f.status <> 'retired'
        RETURNING f.id
    )
    SELECT coalesce(array_agg(r.id ORDER BY r.id), '{}') INTO v_retired FROM r;
    PERFORM set_config('ember.cutover', '', true);

    SELECT count(*) INTO v_returned FROM ember.messages AS m
    WHERE m.thread_id = ANY(v_threads) AND m.seq > c.from_seq AND m.episode_id IS NULL;

    v_result := jsonb_build_object(
        'retired_facts', to_jsonb(v_retired), 'kept_facts', to_jsonb(v_kept), 'rows_returned', v_returned,
        -- Out of a merge (above) or no longer superseded (fact_reopen_closed): the history knows both.
        'reopened_facts', to_jsonb(ARRAY(
            SELECT DISTINCT h.fact_id FROM ember.fact_history AS h
            WHERE h.change = 'reopened' AND h.cutover_id = c.id
            ORDER BY h.fact_id))
    );
    UPDATE ember.cutovers
    SET rolled_back_at = p_now, rolled_back_by = p_by, rollback_recorded_by = session_user, rollback_recorded_at = now(),
        rollback_seq = (SELECT coalesce(max(m.seq), 0) FROM ember.messages AS m),
        rollback_result = v_result
    WHERE id = c.id;
    RETURN jsonb_build_object('action', 'rollback', 'cutover_id', c.id, 'scope', c.scope, 'value', c.scope_value,
                              'from_seq', c.from_seq, 'threads', to_jsonb(v_threads)) || v_result;
END;
$$;
