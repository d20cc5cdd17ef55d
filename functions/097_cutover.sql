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
        AND NOT ember.shadow_excluded(t.id)
    ORDER BY t.id
$$;

-- EM120 unless the scope names something that can be cut over.
CREATE OR REPLACE FUNCTION ember.cutover_check_scope(p_scope text, p_value text)
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
    IF p_scope = 'thread' THEN
        IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = p_value) THEN
            RAISE EXCEPTION 'cut-over scope thread "%": no such thread', p_value USING ERRCODE = 'EM120';
        END IF;
        IF ember.shadow_excluded(p_value) THEN
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

-- What a cut-over (p_rollback false) or a rollback (true) of the scope would change, without
-- changing it: the threads, the rows each pipeline then reads, the facts a rollback retires and
-- keeps, and the comparison's numbers for the scope. refused names why the real call would fail.
CREATE OR REPLACE FUNCTION ember.cutover_plan(
    p_scope text, p_value text DEFAULT NULL, p_rollback boolean DEFAULT false,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
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
    PERFORM ember.cutover_check_scope(p_scope, p_value);
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
            SELECT coalesce(jsonb_agg(f.id ORDER BY f.id), '[]') FROM ember.facts AS f
            WHERE f.cutover_id = v_active AND f.status = 'active'
                AND NOT EXISTS (SELECT 1 FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)
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

-- Cut over a scope now. Refused: a bad scope (EM120), shadow not activated (EM121), a scope an
-- active cut-over already covers in part or whole (EM122).
CREATE OR REPLACE FUNCTION ember.cut_over(
    p_scope text, p_value text DEFAULT NULL, p_by text DEFAULT current_user, p_note text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_overlap bigint;
    c ember.cutovers;
    v_plan jsonb;
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
    v_plan := ember.cutover_plan(p_scope, p_value, false, p_now);
    INSERT INTO ember.cutovers (scope, scope_value, from_seq, from_at, created_by, note)
    VALUES (p_scope, p_value, (SELECT coalesce(max(m.seq), 0) FROM ember.messages AS m), p_now, p_by, p_note)
    RETURNING * INTO c;
    RETURN v_plan || jsonb_build_object('cutover_id', c.id, 'from_seq', c.from_seq, 'from_at', c.from_at);
END;
$$;

-- Roll a scope's cut-over back. Refused (EM123) when the scope has no active cut-over.
CREATE OR REPLACE FUNCTION ember.cutover_rollback(
    p_scope text, p_value text DEFAULT NULL, p_by text DEFAULT current_user,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    c ember.cutovers;
    v_threads text[];
    v_retired bigint[];
    v_kept bigint[];
    v_returned bigint;
    v_result jsonb;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.cutover_check_scope(p_scope, p_value);
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

    v_kept := ARRAY(
        SELECT f.id FROM ember.facts AS f
        WHERE f.cutover_id = c.id AND f.status = 'active'
            AND EXISTS (SELECT 1 FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)
        ORDER BY f.id
    );
    PERFORM set_config('ember.cutover', c.id::text, true);
    WITH r AS (
        UPDATE ember.facts AS f
        SET status = 'retired', retired_reason = format('cut-over %s rolled back', c.id), updated_at = p_now
        WHERE f.cutover_id = c.id AND f.status = 'active' AND NOT (f.id = ANY(v_kept))
        RETURNING f.id
    )
    SELECT coalesce(array_agg(r.id ORDER BY r.id), '{}') INTO v_retired FROM r;
    PERFORM set_config('ember.cutover', '', true);

    SELECT count(*) INTO v_returned FROM ember.messages AS m
    WHERE m.thread_id = ANY(v_threads) AND m.seq > c.from_seq AND m.episode_id IS NULL;

    v_result := jsonb_build_object(
        'retired_facts', to_jsonb(v_retired), 'kept_facts', to_jsonb(v_kept), 'rows_returned', v_returned
    );
    UPDATE ember.cutovers
    SET rolled_back_at = p_now, rolled_back_by = p_by,
        rollback_seq = (SELECT coalesce(max(m.seq), 0) FROM ember.messages AS m),
        rollback_result = v_result
    WHERE id = c.id;
    RETURN jsonb_build_object('action', 'rollback', 'cutover_id', c.id, 'scope', c.scope, 'value', c.scope_value,
                              'from_seq', c.from_seq, 'threads', to_jsonb(v_threads)) || v_result;
END;
$$;

-- Why a proposal may not become a fact under cut-over c, or NULL. Everything is decided again
-- from the rows, never from the proposal's validation_error:
--   the run completed, in the proposal's thread and generation;
--   the text states something;
--   the shadow rule: check_evidence in its own thread, limited to what the run's model saw
--   (its rendered rows cold, its generation through through_seq hot; as submit_shadow_run);
--   the steward's rule: check_evidence across threads (no isolated thread, no steward record);
--   no pointer names a forgotten row;
--   every pointer is shadow's: a row above the cut-over point, or a generation wholly above it.
CREATE OR REPLACE FUNCTION ember.cutover_promotion_error(p ember.shadow_proposals, c ember.cutovers)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r ember.shadow_runs;
    v_seen bigint[];
    v_reason text;
    t record;
BEGIN
    SELECT * INTO r FROM ember.shadow_runs WHERE id = p.run_id;
    IF NOT FOUND OR r.status <> 'completed' OR r.thread_id <> p.thread_id OR r.generation_id <> p.generation_id THEN
        RETURN format('run %s is not a completed run of this proposal''s thread and generation', p.run_id);
    END IF;
    IF p.forgotten_by IS NOT NULL OR p.text IS NULL OR ember.clean_fact_text(p.text) = '' THEN
        RETURN 'the proposal states nothing (empty or forgotten)';
    END IF;
    IF jsonb_typeof(p.evidence) IS DISTINCT FROM 'array' THEN
        RETURN 'evidence must be a list of pointers';
    END IF;
    v_seen := ARRAY(
        SELECT m.id FROM ember.messages AS m
        WHERE m.generation_id = r.generation_id AND m.seq <= r.through_seq
            AND (r.path = 'hot' OR m.seq > r.from_seq)
    );
    v_reason := coalesce(
        ember.check_evidence(p.thread_id, p.evidence_kind, p.evidence, true, v_seen, ARRAY[r.generation_id]),
        ember.check_evidence(NULL, p.evidence_kind, p.evidence, false)
    );
    IF v_reason IS NOT NULL THEN
        RETURN 'evidence refused: ' || v_reason;
    END IF;
    FOR t IN SELECT * FROM ember.evidence_targets(p.evidence) LOOP
        IF EXISTS (
            SELECT 1 FROM ember.messages AS m
            WHERE m.erased_by IS NOT NULL AND (m.id = t.message_id OR m.generation_id = t.generation_id)
        ) THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id) || ': names a forgotten row';
        END IF;
        IF t.message_id IS NOT NULL
           AND (SELECT m.seq FROM ember.messages AS m WHERE m.id = t.message_id) <= c.from_seq THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id)
                || format(': at or before cut-over %s''s point (seq %s), a row the steward reads', c.id, c.from_seq);
        END IF;
        IF t.generation_id IS NOT NULL AND coalesce((
            SELECT min(m.seq) FROM ember.messages AS m WHERE m.generation_id = t.generation_id
        ), 0) <= c.from_seq THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id)
                || format(': the generation has rows at or before cut-over %s''s point (seq %s), which the '
                          'steward reads', c.id, c.from_seq);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

-- Promote one stored proposal if its thread is cut over. Returns the outcome (promoted,
-- already-stated, refused), or NULL when the thread is not cut over or the proposal was
-- considered before. Never raises for a bad proposal: a refusal is a row of cutover_promotions,
-- and the shadow submit that stored the proposal commits as it would have without a cut-over.
CREATE OR REPLACE FUNCTION ember.cutover_promote(p_proposal bigint, p_now timestamptz DEFAULT clock_timestamp())
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    p ember.shadow_proposals;
    c ember.cutovers;
    v_reason text;
    v_fact bigint;
    v_outcome text;
BEGIN
    SELECT * INTO p FROM ember.shadow_proposals WHERE id = p_proposal;
    IF NOT FOUND OR p.validation_error IS NOT NULL
       OR EXISTS (SELECT 1 FROM ember.cutover_promotions WHERE proposal_id = p_proposal) THEN
        RETURN NULL;
    END IF;
    -- FOR SHARE against a concurrent rollback (which takes the row FOR UPDATE): either this
    -- promotion commits first and the rollback retires its fact, or it sees the rollback and
    -- promotes nothing.
    SELECT * INTO c FROM ember.cutovers
    WHERE id = ember.cutover_for_thread(p.thread_id) AND rolled_back_at IS NULL
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    v_reason := ember.cutover_promotion_error(p, c);
    IF v_reason IS NOT NULL THEN
        v_outcome := 'refused';
    ELSE
        -- As the steward's write_fact: an active fact it may read that states the same is kept,
        -- and nothing is written.
        SELECT f.id INTO v_fact
        FROM ember.facts AS f
        WHERE f.status = 'active'
            AND f.text_key = ember.normalize_fact_text(ember.clean_fact_text(p.text))
            AND ember.fact_hidden_reason('memory-steward', f) IS NULL
        ORDER BY f.id
        LIMIT 1;
        IF v_fact IS NOT NULL THEN
            v_outcome := 'already-stated';
        ELSE
            v_outcome := 'promoted';
            INSERT INTO ember.facts (
                text, evidence_kind, categories, run_id, source_threads, shadow_proposal_id, shadow_run_id,
                cutover_id, created_at, updated_at
            ) VALUES (
                p.text, p.evidence_kind,
                -- The labels its generation carries now, never fewer than the proposal carried.
                ember.label_set(p.categories || ember.generation_labels(p.generation_id)),
                NULL,
                ember.label_set(ARRAY(
                    SELECT DISTINCT l FROM ember.evidence_targets(p.evidence) AS t, unnest(t.lineage) AS l
                )),
                p.id, p.run_id, c.id, p_now, p_now
            )
            RETURNING id INTO v_fact;
            INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id, generation_id)
            SELECT v_fact, x.ordinality, (x.value ->> 'message_id')::bigint, (x.value ->> 'generation_id')::uuid
            FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS x (value, ordinality);
        END IF;
    END IF;
    INSERT INTO ember.cutover_promotions (proposal_id, cutover_id, thread_id, shadow_run_id, outcome, fact_id, reason, at)
    VALUES (p.id, c.id, p.thread_id, p.run_id, v_outcome, v_fact, v_reason, p_now);
    RETURN v_outcome;
END;
$$;

CREATE OR REPLACE FUNCTION ember.cutover_promote_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.cutover_promote(new.id, new.created_at);
    RETURN NULL;
END;
$$;

-- After the guard (031_proposal_guard.sql) has let the row in: only a stored valid proposal is
-- considered, and the submit that stores it needs no change.
CREATE OR REPLACE TRIGGER cutover_promote_on_insert
AFTER INSERT ON ember.shadow_proposals
FOR EACH ROW WHEN (new.validation_error IS NULL)
EXECUTE FUNCTION ember.cutover_promote_on_insert();

-- The steward found what it meant to write already stated by fact p_fact (write_fact's "already
-- states this"). When that fact came from a promotion and the steward's own evidence passes its
-- checks, the confirmation is recorded, and the fact then survives a rollback of its cut-over.
-- Returns whether a confirmation was recorded.
CREATE OR REPLACE FUNCTION ember.fact_confirmed(
    p_fact bigint, p_run bigint, p_input jsonb, p_now timestamptz
)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    f ember.facts;
    v_kind text := CASE WHEN jsonb_typeof(p_input -> 'evidence_kind') = 'string' THEN p_input ->> 'evidence_kind' END;
BEGIN
    SELECT * INTO f FROM ember.facts WHERE id = p_fact;
    IF NOT FOUND OR f.cutover_id IS NULL OR f.status <> 'active'
       OR ember.steward_evidence_error(p_run, v_kind, p_input -> 'evidence') IS NOT NULL THEN
        RETURN false;
    END IF;
    INSERT INTO ember.fact_confirmations (fact_id, run_id, evidence_kind, evidence, at)
    VALUES (p_fact, p_run, v_kind, p_input -> 'evidence', p_now);
    INSERT INTO ember.fact_history (fact_id, at, change, status, run_id, cutover_id)
    VALUES (p_fact, p_now, 'confirmed', f.status, p_run, f.cutover_id);
    RETURN true;
END;
$$;
