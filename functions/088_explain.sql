-- "Why do we believe this?" (issue 17): one fact with everything a person needs to decide whether
-- to trust it, as one jsonb document. Each pointer is rendered as the row it names, with its
-- thread, author and time, by the same renderer the steward and shadow read with
-- (ember.render_row), so what a person sees is what the model saw. A row of an isolated thread
-- is named but never rendered (render_row refuses it), and a forgotten row shows its tombstone.

CREATE OR REPLACE FUNCTION ember.explain_pointer(p_ordinal integer, p_message bigint, p_generation uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    m ember.messages;
    g ember.generations;
BEGIN
    IF p_message IS NOT NULL THEN
        SELECT * INTO m FROM ember.messages WHERE id = p_message;
        RETURN jsonb_build_object(
            'ordinal', p_ordinal, 'message_id', m.id, 'thread', m.thread_id, 'seq', m.seq,
            'role', m.role, 'author', m.author, 'tool_status', m.tool_status,
            'at', m.created_at, 'forgotten', m.erased_by IS NOT NULL,
            'isolated', ember.is_isolated(m.thread_id),
            'rendered', CASE WHEN NOT ember.is_isolated(m.thread_id) THEN ember.render_row(m) END
        );
    END IF;
    SELECT * INTO g FROM ember.generations WHERE id = p_generation;
    RETURN jsonb_build_object(
        'ordinal', p_ordinal, 'generation_id', g.id, 'thread', g.thread_id,
        'generation_ordinal', g.ordinal, 'at', g.started_at, 'ended_at', g.ended_at,
        'rows', (SELECT count(*) FROM ember.messages AS x WHERE x.generation_id = g.id),
        'isolated', ember.is_isolated(g.thread_id)
    );
END;
$$;

-- The run that wrote a fact, with its model, when the steward's tables are installed.
CREATE OR REPLACE FUNCTION ember.explain_run(p_run bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_run jsonb;
BEGIN
    IF p_run IS NULL THEN
        RETURN NULL;
    END IF;
    IF to_regclass('ember.steward_runs') IS NULL THEN
        RETURN jsonb_build_object('id', p_run);
    END IF;
    EXECUTE $q$
        SELECT jsonb_build_object('id', r.id, 'model', r.model, 'status', r.status,
                                  'started_at', r.started_at, 'finished_at', r.finished_at)
        FROM ember.steward_runs AS r WHERE r.id = $1
    $q$ INTO v_run USING p_run;
    RETURN coalesce(v_run, jsonb_build_object('id', p_run));
END;
$$;

-- user-accepted: the conclusion (the last assistant row cited) and the human message after it
-- that accepts it, in the same thread: the pair check_evidence requires. p_evidence is the list of
-- rendered pointers (explain_pointer's or comparison_pointer_json's: thread, seq, role, author);
-- NULL for any other kind.
CREATE OR REPLACE FUNCTION ember.explain_acceptance(p_kind text, p_evidence jsonb)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object('conclusion', c.value, 'acceptance', a.value)
    FROM jsonb_array_elements(p_evidence) AS c (value)
    INNER JOIN jsonb_array_elements(p_evidence) AS a (value)
        ON a.value ->> 'thread' = c.value ->> 'thread'
        AND (a.value ->> 'seq')::bigint > (c.value ->> 'seq')::bigint
        AND a.value ->> 'role' = 'user' AND a.value ->> 'author' = 'human'
    WHERE p_kind = 'user-accepted' AND c.value ->> 'role' = 'assistant'
    ORDER BY (c.value ->> 'seq')::bigint DESC, (a.value ->> 'seq')::bigint
    LIMIT 1
$$;

-- The fact an explain is asked about; EM095 when there is none. The host's explain_fact and the
-- analyst's comparison_explain_fact (088_explain_analyst.sql) both start here.
CREATE OR REPLACE FUNCTION ember.explain_fact_row(p_fact bigint)
RETURNS ember.facts
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    f ember.facts;
BEGIN
    SELECT * INTO f FROM ember.facts WHERE id = p_fact;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no such fact: %', coalesce(p_fact::text, 'NULL')
            USING ERRCODE = 'EM095';
    END IF;
    RETURN f;
END;
$$;

CREATE OR REPLACE FUNCTION ember.explain_fact(p_fact bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    f ember.facts := ember.explain_fact_row(p_fact);
    v_evidence jsonb;
    v_acceptance jsonb;
BEGIN
    -- search_memory's rule (fact_visible): a fact derived from a thread sealed since is read by
    -- no one, through this door either.
    IF NOT ember.fact_visible(true, '{}', f.categories, f.source_threads) THEN
        RAISE EXCEPTION 'fact %: derived from an isolated thread, it is read by no one', f.id
            USING ERRCODE = 'EM095';
    END IF;
    SELECT coalesce(jsonb_agg(ember.explain_pointer(e.ordinal, e.message_id, e.generation_id) ORDER BY e.ordinal), '[]')
    INTO v_evidence
    FROM ember.fact_evidence AS e WHERE e.fact_id = f.id;

    v_acceptance := ember.explain_acceptance(f.evidence_kind, v_evidence);

    RETURN jsonb_build_object(
        'fact', jsonb_build_object(
            'id', f.id, 'text', f.text, 'status', f.status, 'evidence_kind', f.evidence_kind,
            'categories', to_jsonb(f.categories), 'merged_into', f.merged_into,
            'retired_reason', f.retired_reason, 'forgotten', f.text IS NULL,
            'created_at', f.created_at, 'updated_at', f.updated_at
        ),
        -- Both time axes: when the fact was true as its evidence says (valid), and when Ember
        -- learned and last changed it (recorded; every change is in history below).
        'valid', jsonb_build_object('from', f.valid_from, 'until', f.valid_until,
                                    'superseded_by', f.superseded_by),
        'recorded', jsonb_build_object(
            'written_at', (SELECT h.at FROM ember.fact_history AS h
                           WHERE h.fact_id = f.id AND h.change = 'written' ORDER BY h.id LIMIT 1),
            'last_changed_at', (SELECT max(h.at) FROM ember.fact_history AS h WHERE h.fact_id = f.id)
        ),
        'evidence_kind', f.evidence_kind,
        'evidence', v_evidence,
        'acceptance', v_acceptance,
        'run', ember.explain_run(f.run_id),
        -- A fact shadow wrote through a cut-over: the proposal, its run and the cut-over.
        'promotion', CASE WHEN f.cutover_id IS NOT NULL THEN jsonb_build_object(
            'proposal', f.shadow_proposal_id, 'shadow_run', f.shadow_run_id, 'cutover', f.cutover_id,
            'confirmed_by_steward', (SELECT coalesce(jsonb_agg(jsonb_build_object('run', k.run_id, 'at', k.at)
                                                               ORDER BY k.id), '[]')
                                     FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)
        ) END,
        -- What a rollback of an active cut-over would take back (097_cutover.sql, the same rule the
        -- rollback applies): a promoted fact, or a merge that took one in (via names it).
        'rollback_would_retire', (
            SELECT jsonb_build_object('cutover', c.id, 'via', t.via)
            FROM ember.cutovers AS c
            CROSS JOIN LATERAL ember.cutover_taken_back(c.id) AS t
            WHERE c.rolled_back_at IS NULL AND t.fact_id = f.id
            ORDER BY c.id LIMIT 1
        ),
        -- Facts merged into this one, from the history (a source forgotten since has left its
        -- merge link there, and its text nowhere).
        'merged_from', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'fact', s.id, 'text', s.text, 'status', s.status, 'evidence_kind', s.evidence_kind,
                'merged_at', h.at
            ) ORDER BY s.id)
            FROM ember.fact_history AS h
            INNER JOIN ember.facts AS s ON s.id = h.fact_id
            WHERE h.change = 'merged' AND h.merged_into = f.id
        ), '[]'),
        'history', coalesce((
            SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                'at', h.at, 'change', h.change, 'status', h.status, 'merged_into', h.merged_into,
                'retired_reason', h.retired_reason, 'detail', h.detail,
                'evidence_removed', h.evidence_removed, 'run', h.run_id,
                'proposal', h.proposal_id, 'shadow_run', h.shadow_run_id, 'cutover', h.cutover_id,
                'validity', h.validity,
                'forgetting', CASE WHEN fg.id IS NOT NULL THEN
                    jsonb_build_object('id', fg.id, 'reason', fg.reason, 'scope', fg.scope,
                                       'thread', fg.thread_id) END
            )) ORDER BY h.at, h.id)
            FROM ember.fact_history AS h
            LEFT JOIN ember.forgettings AS fg ON fg.id = h.forgetting_id
            WHERE h.fact_id = f.id
        ), '[]')
    );
END;
$$;
