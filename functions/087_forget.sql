-- Forgetting (issue 17; design.md section 4, "Forgetting and history"): erase rows at the user's
-- request and cascade, in the same transaction, to everything derived from them.
--
-- An erased row keeps its id, seq, thread, generation, role, author and time, so cursors, pointers
-- and the order of a thread stay consistent; its content becomes a tombstone and its raw blocks,
-- tool call id and tool name go. Deleting the row instead would break every pointer at it and
-- every cursor that counted it, and leave nothing to say that something was forgotten.
--
-- The cascade, each step decided by rules that already exist rather than new ones:
--   * copies of an erased row (copy_messages) are erased with it: they are the same text;
--   * every fact citing an erased row (or a generation with erased rows) is re-checked with
--     check_evidence on the pointers it has left. Still justified: it stays, its evidence list
--     shrinks (history row 'evidence-shrunk'). Not justified: it is retired 'source-forgotten',
--     its text and embedding erased (history row 'forgotten'). A fact that a retired fact was
--     merged into is re-checked the same way, and so on along the merges;
--   * shadow proposals citing an erased row: re-checked likewise; the unjustified lose their text
--     and embedding and become rejected rows ('source-forgotten');
--   * the steward's record is redacted where it quotes an erased row or a forgotten fact (the
--     backlog pages it was given, search results, its write_fact calls): the quoted text becomes
--     a tombstone and the rows stay, since they also record everything else the steward did.
--     The steward's record is otherwise never forgotten directly;
--   * main's record of a message it sent to a side chat (main_actions) holds the same text as the
--     event row, and is emptied with it;
--   * each touched thread's prefix and pending signals are dropped and a running shadow run is
--     asked to stop (shadow_withdraw, as a human message does); a running steward run that read
--     an erased row is ended as failed, so nothing it still holds can be submitted.

-- Forget's facts: the pointers at the erased rows (p_erased) and at generations with one
-- (p_gens) go, and every fact that lost one is re-checked, then along the merges of those retired.
-- Returns the facts kept with their remaining evidence, the ones retired (and their texts, to
-- find them quoted in the steward's record), and the ones re-checked along a merge and kept.
CREATE OR REPLACE FUNCTION ember.forget_facts(
    p_tenant text, p_erased bigint[], p_gens uuid[], p_now timestamptz,
    OUT facts_kept jsonb, OUT facts_retired bigint[], OUT retired_texts text[], OUT facts_rechecked bigint[]
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_check bigint[];
    v_shrunk bigint[];
    v_seen bigint[] := '{}';
    v_new_retired bigint[] := '{}';
    f record;
BEGIN
    facts_kept := '[]';
    facts_retired := '{}';
    retired_texts := '{}';
    facts_rechecked := '{}';
    -- Pointers at what was erased go, in one statement (one history row per fact, from the
    -- trigger); the facts they belonged to are re-checked, then along the merges of those
    -- retired. Set-based on purpose: a per-fact anti-join against the erased rows costs facts
    -- times rows.
    WITH gone AS (
        DELETE FROM ember.fact_evidence AS e
        WHERE e.tenant_id = p_tenant AND (e.message_id = ANY(p_erased) OR e.generation_id = ANY(p_gens))
        RETURNING e.fact_id
    )
    SELECT coalesce(array_agg(DISTINCT gone.fact_id), '{}') INTO v_shrunk FROM gone;
    v_check := v_shrunk;
    WHILE cardinality(v_check) > 0 LOOP
        v_seen := v_seen || v_check;
        FOR f IN
            SELECT x.id, x.evidence_kind, x.text, coalesce((
                SELECT jsonb_agg(
                    CASE WHEN e.message_id IS NOT NULL THEN jsonb_build_object('message_id', e.message_id)
                         ELSE jsonb_build_object('generation_id', e.generation_id) END
                    ORDER BY e.ordinal)
                FROM ember.fact_evidence AS e WHERE e.tenant_id = x.tenant_id AND e.fact_id = x.id
            ), '[]') AS remaining
            FROM ember.facts AS x
            WHERE x.tenant_id = p_tenant AND x.id = ANY(v_check) AND x.text IS NOT NULL
            ORDER BY x.id
            FOR UPDATE OF x
        LOOP
            IF jsonb_array_length(f.remaining) > 0
               AND ember.check_evidence(NULL, f.evidence_kind, f.remaining, false) IS NULL THEN
                IF f.id = ANY(v_shrunk) THEN
                    facts_kept := facts_kept || jsonb_build_object('fact', f.id, 'evidence', f.remaining);
                ELSE
                    -- Reached along a merge and still justified by its own pointers.
                    facts_rechecked := facts_rechecked || f.id;
                END IF;
            ELSE
                v_new_retired := v_new_retired || f.id;
                retired_texts := retired_texts || f.text;
            END IF;
        END LOOP;
        -- The merge targets of the facts about to be retired are re-checked next.
        v_check := ARRAY(
            SELECT DISTINCT x.merged_into FROM ember.facts AS x
            WHERE x.tenant_id = p_tenant AND x.id = ANY(v_new_retired) AND x.merged_into IS NOT NULL AND NOT x.merged_into = ANY(v_seen)
        );
        UPDATE ember.facts AS x
        SET status = 'retired', retired_reason = 'source-forgotten', merged_into = NULL,
            text = NULL, embedding = NULL, updated_at = greatest(p_now, x.updated_at)
        WHERE x.tenant_id = p_tenant AND x.id = ANY(v_new_retired);
        facts_retired := facts_retired || v_new_retired;
        v_new_retired := '{}';
    END LOOP;

    -- A forgotten fact's history keeps no free text that could quote it.
    UPDATE ember.fact_history AS h
    SET detail = NULL,
        retired_reason = CASE WHEN h.retired_reason = 'source-forgotten' THEN h.retired_reason END
    WHERE h.tenant_id = p_tenant AND h.fact_id = ANY(facts_retired) AND h.change <> 'forgotten'
        AND (h.detail IS NOT NULL OR h.retired_reason IS DISTINCT FROM 'source-forgotten')
        AND (h.detail IS NOT NULL OR h.retired_reason IS NOT NULL);
END;
$$;

-- Forget's shadow proposals: those of the touched threads (p_threads) that cite an erased row are
-- re-checked on what they have left; returns the ones erased and the ones kept.
CREATE OR REPLACE FUNCTION ember.forget_proposals(
    p_tenant text, p_forgetting bigint, p_threads text[], p_erased bigint[], p_gens uuid[],
    OUT proposals_erased bigint[], OUT proposals_kept bigint[]
)
LANGUAGE plpgsql
AS $$
DECLARE
    p record;
    v_remaining jsonb;
BEGIN
    proposals_erased := '{}';
    proposals_kept := '{}';
    FOR p IN
        SELECT sp.* FROM ember.shadow_proposals AS sp
        WHERE sp.tenant_id = p_tenant AND sp.thread_id = ANY(p_threads) AND sp.forgotten_by IS NULL
            AND jsonb_typeof(sp.evidence) = 'array'
            AND EXISTS (
                SELECT 1 FROM jsonb_array_elements(sp.evidence) AS x (v)
                WHERE (jsonb_typeof(x.v) = 'object' AND jsonb_typeof(x.v -> 'message_id') = 'number'
                       AND (x.v ->> 'message_id')::numeric = ANY(p_erased::numeric[]))
                   OR (jsonb_typeof(x.v) = 'object' AND (x.v ->> 'generation_id') = ANY(p_gens::text[]))
            )
        ORDER BY sp.id FOR UPDATE
    LOOP
        v_remaining := (
            SELECT coalesce(jsonb_agg(x.v ORDER BY x.o), '[]')
            FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS x (v, o)
            WHERE NOT coalesce(
                (jsonb_typeof(x.v) = 'object' AND jsonb_typeof(x.v -> 'message_id') = 'number'
                 AND (x.v ->> 'message_id')::numeric = ANY(p_erased::numeric[]))
                OR (jsonb_typeof(x.v) = 'object' AND (x.v ->> 'generation_id') = ANY(p_gens::text[])),
                false)
        );
        IF ember.is_isolated(p_tenant, p.thread_id) THEN
            -- Sealed since it was proposed: the proposal guard refuses any change to a row of an
            -- isolated thread, and the comparison never reads one, so the row goes whole.
            -- Its judged pairs go with it (a foreign key cascaded this before migration 0036:
            -- judged_pairs stays on the coordinator, which cannot point into a distributed table).
            DELETE FROM ember.judged_pairs WHERE tenant_id = p_tenant AND proposal_id = p.id;
            -- And the record of its promotion, if a cut-over promoted it: the fact it wrote keeps
            -- shadow_proposal_id (no foreign key) and is re-checked as every fact is.
            DELETE FROM ember.cutover_promotions
            WHERE tenant_id = p_tenant AND proposal_id = p.id AND thread_id = p.thread_id;
            DELETE FROM ember.shadow_proposals WHERE tenant_id = p_tenant AND id = p.id AND thread_id = p.thread_id;
            proposals_erased := proposals_erased || p.id;
        ELSIF p.validation_error IS NULL AND jsonb_array_length(v_remaining) > 0
           AND ember.check_evidence(p.thread_id, p.evidence_kind, v_remaining, true) IS NULL THEN
            UPDATE ember.shadow_proposals SET evidence = v_remaining
            WHERE tenant_id = p_tenant AND id = p.id AND thread_id = p.thread_id;
            proposals_kept := proposals_kept || p.id;
        ELSE
            UPDATE ember.shadow_proposals
            SET text = NULL, embedding = NULL, forgotten_by = p_forgetting,
                validation_error = 'source-forgotten'
            WHERE tenant_id = p_tenant AND id = p.id AND thread_id = p.thread_id;
            proposals_erased := proposals_erased || p.id;
        END IF;
    END LOOP;
END;
$$;

-- Forget's work in flight: each touched thread is withdrawn from shadow (its running run asked to
-- stop), and a running steward run that read an erased row is failed; returns both lists of runs.
CREATE OR REPLACE FUNCTION ember.forget_stop_work(
    p_tenant text, p_threads text[], p_erased bigint[], p_now timestamptz,
    OUT runs_cancelled bigint[], OUT steward_runs_cancelled bigint[]
)
LANGUAGE plpgsql
AS $$
BEGIN
    steward_runs_cancelled := '{}';
    -- Work in flight on the touched threads stops: prefixes and offers dropped, runs cancelled.
    PERFORM ember.shadow_withdraw(p_tenant, t) FROM unnest(p_threads) AS t;
    runs_cancelled := ARRAY(
        SELECT r.id FROM ember.shadow_runs AS r
        WHERE r.tenant_id = p_tenant AND r.thread_id = ANY(p_threads) AND r.status = 'running' AND r.cancel_requested
        ORDER BY r.id
    );
    IF to_regclass('ember.steward_runs') IS NOT NULL THEN
        WITH u AS (
            UPDATE ember.steward_runs
            SET status = 'failed', error = 'cancelled: rows it read were forgotten',
                finished_at = greatest(p_now, started_at)
            WHERE tenant_id = p_tenant AND status = 'running'
                AND EXISTS (SELECT 1 FROM unnest(read_message_ids) AS x (id)
                            INNER JOIN unnest(p_erased) AS e (id) ON e.id = x.id)
            RETURNING id
        )
        SELECT coalesce(array_agg(u.id ORDER BY u.id), '{}') INTO steward_runs_cancelled FROM u;
    END IF;
END;
$$;

-- Validates nothing: the caller (forget_messages or forget_thread) has checked its input.
-- p_ids are rows not yet erased and not the steward's. Returns the jsonb report. The steps run in
-- the order the cascade above states, all under the erasing setting set here.
CREATE OR REPLACE FUNCTION ember.forget_apply(
    p_tenant text, p_forgetting bigint, p_ids bigint[], p_now timestamptz
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_erased bigint[];
    v_contents text[];
    v_steward_rows bigint[];
    v_threads text[];
    v_gens uuid[];
    v_since timestamptz;
    f record;
    p record;
    w record;
BEGIN
    PERFORM set_config('ember.erasing', 'on', true);
    PERFORM set_config('ember.forgetting', p_forgetting::text, true);

    -- Copies are the same text.
    v_erased := p_ids || ARRAY(
        SELECT m.id FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.copied_from = ANY(p_ids) AND m.erased_by IS NULL
            AND NOT m.id = ANY(p_ids) AND NOT ember.is_steward_thread(p_tenant, m.thread_id)
    );
    v_threads := ARRAY(
        SELECT DISTINCT m.thread_id FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(v_erased)
    );
    -- Appends to these threads wait until this commits (append_message locks the thread row).
    PERFORM 1 FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = ANY(v_threads) ORDER BY t.id FOR UPDATE;

    -- What these rows said, to find it quoted in the steward's record; then the tombstones.
    SELECT array_agg(m.id ORDER BY m.id), array_agg(m.content ORDER BY m.id), min(m.created_at)
    INTO v_erased, v_contents, v_since
    FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(v_erased);
    UPDATE ember.messages AS m
    SET content = ember.forget_tombstone(),
        blocks = NULL,
        tool_call_id = CASE WHEN m.tool_call_id IS NOT NULL THEN 'forgotten' END,
        tool_name = CASE WHEN m.tool_name IS NOT NULL THEN 'forgotten' END,
        erased_by = p_forgetting
    WHERE m.tenant_id = p_tenant AND m.id = ANY(v_erased);

    -- Generations with an erased row: a pointer at the whole generation no longer stands.
    v_gens := ARRAY(
        SELECT DISTINCT m.generation_id FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(v_erased)
    );

    f := ember.forget_facts(p_tenant, v_erased, v_gens, p_now);

    v_steward_rows := ember.forget_steward_record(
        v_erased, v_contents, f.facts_retired, f.retired_texts, v_since,
        least(v_since, (SELECT min(x.created_at) FROM ember.facts AS x WHERE x.tenant_id = p_tenant AND x.id = ANY(f.facts_retired)))
    );

    p := ember.forget_proposals(p_tenant, p_forgetting, v_threads, v_erased, v_gens);

    -- Main's record of a message it sent (side_chat_message) holds the same text as the row.
    UPDATE ember.main_actions AS a
    SET message = ember.forget_tombstone(), result = ember.forget_tombstone()
    FROM ember.thread_events AS e
    WHERE a.tenant_id = p_tenant AND e.tenant_id = p_tenant AND e.id = a.event_id AND e.message_id = ANY(v_erased);

    w := ember.forget_stop_work(p_tenant, v_threads, v_erased, p_now);

    RETURN jsonb_build_object(
        'forgetting', p_forgetting,
        'rows_erased', to_jsonb(v_erased),
        'steward_rows_redacted', to_jsonb(v_steward_rows),
        'facts_kept', f.facts_kept,
        'facts_retired', to_jsonb(ARRAY(SELECT i FROM unnest(f.facts_retired) AS i ORDER BY i)),
        'facts_rechecked', to_jsonb(ARRAY(SELECT DISTINCT i FROM unnest(f.facts_rechecked) AS i ORDER BY i)),
        'proposals_erased', to_jsonb(p.proposals_erased),
        'proposals_kept', to_jsonb(p.proposals_kept),
        'runs_cancelled', to_jsonb(w.runs_cancelled),
        'steward_runs_cancelled', to_jsonb(w.steward_runs_cancelled)
    );
END;
$$;

CREATE OR REPLACE FUNCTION ember.forget_require_reason(p_reason text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'forgetting needs a reason (it is kept, without the erased text, in the history)'
            USING ERRCODE = 'EM097';
    END IF;
END;
$$;

-- forget_messages(tenant, ids, reason): erase these rows of the tenant and what derives from
-- them. Every id must name an existing row of the tenant outside the steward's record (the steward's rows go only through the facts it
-- wrote); rows already erased are reported, and when every row is, nothing happens and the
-- answer says so. Nothing is erased unless the whole call is valid.
CREATE OR REPLACE FUNCTION ember.forget_messages(
    p_tenant text,
    p_ids bigint[],
    p_reason text,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_unknown bigint[];
    v_steward bigint[];
    v_already bigint[];
    v_todo bigint[];
    v_forgetting bigint;
    v_result jsonb;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.forget_require_reason(p_reason);
    IF p_ids IS NULL OR cardinality(p_ids) = 0 OR array_position(p_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'forget_messages needs a non-empty list of message ids without NULLs'
            USING ERRCODE = 'EM097';
    END IF;
    v_unknown := ARRAY(
        SELECT DISTINCT i FROM unnest(p_ids) AS i
        WHERE NOT EXISTS (SELECT 1 FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = i) ORDER BY i
    );
    IF cardinality(v_unknown) > 0 THEN
        RAISE EXCEPTION 'no such message: %', array_to_string(v_unknown, ', ')
            USING ERRCODE = 'EM095';
    END IF;
    v_steward := ARRAY(
        SELECT DISTINCT m.id FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.id = ANY(p_ids) AND ember.is_steward_thread(m.tenant_id, m.thread_id)
        ORDER BY m.id
    );
    IF cardinality(v_steward) > 0 THEN
        RAISE EXCEPTION 'message % belongs to the steward''s record', array_to_string(v_steward, ', ')
            USING ERRCODE = 'EM096',
                  HINT = 'the steward''s rows are forgotten through the facts it wrote: forget their sources';
    END IF;
    v_already := ARRAY(
        SELECT DISTINCT m.id FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.id = ANY(p_ids) AND m.erased_by IS NOT NULL ORDER BY m.id
    );
    v_todo := ARRAY(
        SELECT DISTINCT m.id FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.id = ANY(p_ids) AND m.erased_by IS NULL ORDER BY m.id
    );
    IF cardinality(v_todo) = 0 THEN
        RAISE NOTICE 'messages % were already forgotten: nothing to do', array_to_string(v_already, ', ');
        RETURN jsonb_build_object('noop', true, 'already_forgotten', to_jsonb(v_already));
    END IF;
    INSERT INTO ember.forgettings (tenant_id, scope, reason, requested_at)
    VALUES (p_tenant, 'messages', p_reason, p_now)
    RETURNING id INTO v_forgetting;
    v_result := ember.forget_apply(p_tenant, v_forgetting, v_todo, p_now)
        || jsonb_build_object('noop', false, 'already_forgotten', to_jsonb(v_already));
    UPDATE ember.forgettings SET result = v_result WHERE id = v_forgetting;
    RETURN v_result;
END;
$$;

-- forget_thread(tenant, thread, reason): every row of the tenant's thread, as forget_messages.
CREATE OR REPLACE FUNCTION ember.forget_thread(
    p_tenant text,
    p_thread text,
    p_reason text,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_todo bigint[];
    v_forgetting bigint;
    v_result jsonb;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.forget_require_reason(p_reason);
    IF p_thread IS NULL OR NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_thread) THEN
        RAISE EXCEPTION 'no such thread: %', coalesce(p_thread, 'NULL')
            USING ERRCODE = 'EM095';
    END IF;
    IF ember.is_steward_thread(p_tenant, p_thread) THEN
        RAISE EXCEPTION 'thread % is the steward''s record', p_thread
            USING ERRCODE = 'EM096',
                  HINT = 'the steward''s rows are forgotten through the facts it wrote: forget their sources';
    END IF;
    -- Lock first, so no row is appended between the list and the erasure.
    PERFORM 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_thread FOR UPDATE;
    v_todo := ARRAY(
        SELECT m.id FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.thread_id = p_thread AND m.erased_by IS NULL ORDER BY m.seq
    );
    IF cardinality(v_todo) = 0 THEN
        RAISE NOTICE 'thread % has no rows left to forget: nothing to do', p_thread;
        RETURN jsonb_build_object('noop', true, 'thread', p_thread);
    END IF;
    INSERT INTO ember.forgettings (tenant_id, scope, thread_id, reason, requested_at)
    VALUES (p_tenant, 'thread', p_thread, p_reason, p_now)
    RETURNING id INTO v_forgetting;
    v_result := ember.forget_apply(p_tenant, v_forgetting, v_todo, p_now)
        || jsonb_build_object('noop', false, 'thread', p_thread);
    UPDATE ember.forgettings SET result = v_result WHERE id = v_forgetting;
    RETURN v_result;
END;
$$;
