-- The analyst's explain (issue 24): the same questions for a fact or a shadow proposal, answered
-- for ember_analyst, who reads no table. What the host sees (explain_fact) is not loosened for
-- this; these are separate functions with their own limits: a pointer's row is rendered bounded
-- to the setting analyst_row_chars (comparison_render_pointer), a row of an isolated thread is
-- named as isolated and nothing more, an item of an isolated thread is refused (EM074) as the
-- comparison views leave it out, and a forget call shows its id and scope but not its reason (the
-- host's words, which may say what was forgotten). Each adds how the item fares in the
-- comparison, over all time: its pairs in each coverage, what shadow read, why it is excluded.

-- One pointer as the analyst sees it, in explain_pointer's keys (thread, seq, role, author,
-- rendered ...) so the same layout reads both.
CREATE OR REPLACE FUNCTION ember.comparison_pointer_json(p_ordinal bigint, p_message bigint, p_generation uuid)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN r.isolated THEN jsonb_strip_nulls(jsonb_build_object(
            'ordinal', p_ordinal, 'message_id', p_message, 'generation_id', p_generation, 'isolated', true
        ))
        WHEN NOT r.target_found THEN jsonb_strip_nulls(jsonb_build_object(
            'ordinal', p_ordinal, 'message_id', p_message, 'generation_id', p_generation, 'found', false
        ))
        WHEN p_message IS NOT NULL THEN jsonb_build_object(
            'ordinal', p_ordinal, 'message_id', p_message, 'thread', r.thread_id, 'seq', r.seq,
            'role', r.role, 'author', r.author, 'tool_status', r.tool_status, 'at', r.at,
            'forgotten', r.forgotten, 'isolated', false, 'rendered', r.excerpt
        )
        ELSE jsonb_build_object(
            'ordinal', p_ordinal, 'generation_id', p_generation, 'thread', r.thread_id,
            'generation_ordinal', r.generation_ordinal, 'at', r.at, 'isolated', false,
            'rows', (SELECT count(*) FROM ember.messages AS x WHERE x.generation_id = p_generation),
            'rendered', r.excerpt
        )
    END
    FROM ember.comparison_render_pointer(p_message, p_generation) AS r
$$;

-- A fact's history as the analyst sees it: explain_fact's, with a forget call by id and scope.
CREATE OR REPLACE FUNCTION ember.comparison_fact_history(p_fact bigint)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
        'at', h.at, 'change', h.change, 'status', h.status, 'merged_into', h.merged_into,
        'retired_reason', h.retired_reason, 'detail', h.detail,
        'evidence_removed', h.evidence_removed, 'run', h.run_id,
        'forgetting', CASE WHEN fg.id IS NOT NULL THEN jsonb_build_object('id', fg.id, 'scope', fg.scope) END
    )) ORDER BY h.at, h.id), '[]')
    FROM ember.fact_history AS h
    LEFT JOIN ember.forgettings AS fg ON fg.id = h.forgetting_id
    WHERE h.fact_id = p_fact
$$;

-- True when the fact cites a row or generation of an isolated thread.
CREATE OR REPLACE FUNCTION ember.comparison_fact_isolated(p_fact bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (
        SELECT 1 FROM ember.comparison_fact_pointers AS fp
        WHERE fp.fact_id = p_fact
          AND fp.thread_id IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
    )
$$;

-- Long on purpose: one document, in the order a reader goes through it (the fact, its evidence,
-- per thread what shadow read and matched, the judge's pairs, history, the agreement), each part
-- one query. The rules it applies are the comparison's own (comparison_fact_pointers,
-- comparison_fact_reads, comparison_excluded_reason, comparison_judged_pairs, comparison_agreement);
-- split further, the parts would only pass the fact row along.
CREATE OR REPLACE FUNCTION ember.comparison_explain_fact(p_fact bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    f ember.facts := ember.explain_fact_row(p_fact);
    v_evidence jsonb;
    v_threads jsonb;
    v_semantic jsonb;
    v_judged boolean;
    v_in_scope boolean;
BEGIN
    IF ember.comparison_fact_isolated(f.id) THEN
        RAISE EXCEPTION 'fact % is not shown to the analyst: it cites an isolated thread', f.id
            USING ERRCODE = 'EM074',
                  HINT = 'the comparison leaves out everything of an isolated thread';
    END IF;

    SELECT coalesce(jsonb_agg(
        ember.comparison_pointer_json(fp.ordinal, fp.message_id, fp.generation_id)
        || jsonb_strip_nulls(jsonb_build_object('unread_reason', fp.unread_reason))
        ORDER BY fp.ordinal), '[]')
    INTO v_evidence
    FROM ember.comparison_fact_pointers AS fp WHERE fp.fact_id = f.id;

    -- Per thread cited: whether shadow could read it, which paths did, and the pairs there.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'thread', t.thread_id,
        'excluded_reason', t.excluded_reason,
        'read_by_shadow', (
            SELECT to_jsonb(coalesce(array_agg(DISTINCT fr.path ORDER BY fr.path), '{}'))
            FROM ember.comparison_fact_reads AS fr
            WHERE fr.fact_id = f.id AND fr.thread_id = t.thread_id
        ),
        'exact', CASE WHEN t.excluded_reason IS NULL THEN (
            SELECT to_jsonb(coalesce(array_agg(p.id ORDER BY p.id), '{}'))
            FROM ember.shadow_proposals AS p
            WHERE p.thread_id = t.thread_id AND p.validation_error IS NULL AND p.text_key = f.text_key
        ) ELSE '[]'::jsonb END,
        'evidence', CASE WHEN t.excluded_reason IS NULL THEN (
            SELECT coalesce(jsonb_agg(jsonb_build_object('proposal', n.id, 'shared', n.shared) ORDER BY n.id), '[]')
            FROM (
                SELECT p.id, jsonb_agg(e.value ORDER BY e.ordinality) AS shared
                FROM ember.shadow_proposals AS p
                CROSS JOIN LATERAL jsonb_array_elements(p.evidence) WITH ORDINALITY AS e (value, ordinality)
                WHERE p.thread_id = t.thread_id AND p.validation_error IS NULL
                  AND EXISTS (
                      SELECT 1 FROM ember.fact_evidence AS fe
                      WHERE fe.fact_id = f.id
                        AND (fe.message_id = (e.value ->> 'message_id')::bigint
                             OR fe.generation_id = (e.value ->> 'generation_id')::uuid)
                  )
                GROUP BY p.id
            ) AS n
        ) ELSE '[]'::jsonb END
    ) ORDER BY t.thread_id), '[]')
    INTO v_threads
    FROM (
        SELECT fp.thread_id,
               ember.comparison_excluded_reason(array_agg(fp.unread_reason ORDER BY fp.ordinal)) AS excluded_reason
        FROM ember.comparison_fact_pointers AS fp
        WHERE fp.fact_id = f.id AND fp.thread_id IS NOT NULL
        GROUP BY fp.thread_id
    ) AS t;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'proposal', s.proposal_id, 'thread', s.thread_id, 'judge_run', s.judge_run_id, 'judge_model', s.model
    ) ORDER BY s.proposal_id), '[]')
    INTO v_semantic
    FROM (
        SELECT DISTINCT ON (jp.proposal_id) jp.proposal_id, p.thread_id, jp.judge_run_id, jp.model
        FROM ember.comparison_judged_pairs AS jp
        JOIN ember.shadow_proposals AS p ON p.id = jp.proposal_id AND p.validation_error IS NULL
        WHERE jp.fact_id = f.id
          AND p.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
        ORDER BY jp.proposal_id, jp.finished_at DESC
    ) AS s;
    v_judged := EXISTS (
        SELECT 1 FROM ember.comparison_judged_items() AS j WHERE j.side = 'fact' AND j.item_id = f.id
    );
    -- A judged pair counts only for a fact shadow could have read, as in comparison_items.
    v_in_scope := EXISTS (
        SELECT 1 FROM jsonb_array_elements(v_threads) AS t WHERE t.value -> 'excluded_reason' = 'null'
    );
    IF NOT v_in_scope THEN
        v_semantic := '[]';
    END IF;

    RETURN jsonb_build_object(
        'item', 'fact',
        'fact', jsonb_build_object(
            'id', f.id, 'text', f.text, 'status', f.status, 'evidence_kind', f.evidence_kind,
            'categories', to_jsonb(f.categories), 'merged_into', f.merged_into,
            'retired_reason', f.retired_reason, 'forgotten', f.text IS NULL,
            'created_at', f.created_at, 'updated_at', f.updated_at
        ),
        'evidence_kind', f.evidence_kind,
        'evidence', v_evidence,
        'acceptance', ember.explain_acceptance(f.evidence_kind, v_evidence),
        'run', ember.explain_run(f.run_id),
        'merged_from', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'fact', s.id, 'status', s.status, 'evidence_kind', s.evidence_kind, 'merged_at', h.at,
                -- A source citing an isolated thread keeps its id here, never its text.
                'text', CASE WHEN NOT ember.comparison_fact_isolated(s.id) THEN s.text END,
                'hidden', ember.comparison_fact_isolated(s.id)
            ) ORDER BY s.id)
            FROM ember.fact_history AS h
            INNER JOIN ember.facts AS s ON s.id = h.fact_id
            WHERE h.change = 'merged' AND h.merged_into = f.id
        ), '[]'),
        'history', ember.comparison_fact_history(f.id),
        'comparison', jsonb_build_object(
            'agreement', ember.comparison_agreement(
                'fact', false, NOT v_in_scope,
                EXISTS (SELECT 1 FROM jsonb_array_elements(v_threads) AS t WHERE t.value -> 'exact' <> '[]'),
                v_semantic <> '[]',
                EXISTS (SELECT 1 FROM jsonb_array_elements(v_threads) AS t WHERE t.value -> 'evidence' <> '[]')
            ),
            'in_scope', v_in_scope,
            'threads', v_threads,
            'semantic', v_semantic,
            'judged', v_judged
        )
    );
END;
$$;

-- Long on purpose, like comparison_explain_fact: one document, the proposal, its evidence, its
-- exact, evidence and judged matches among the facts in scope, and its run, each part one query.
CREATE OR REPLACE FUNCTION ember.comparison_explain_proposal(p_proposal bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    p ember.shadow_proposals;
    r ember.shadow_runs;
    v_evidence jsonb;
    v_exact jsonb := '[]';
    v_neighbours jsonb := '[]';
    v_semantic jsonb := '[]';
    v_judged boolean;
    v_valid boolean;
    v_scope bigint[];
BEGIN
    SELECT * INTO p FROM ember.shadow_proposals WHERE id = p_proposal;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no such proposal: %', coalesce(p_proposal::text, 'NULL')
            USING ERRCODE = 'EM095';
    END IF;
    IF ember.is_isolated(p.thread_id) THEN
        RAISE EXCEPTION 'proposal % is not shown to the analyst: its thread is isolated', p.id
            USING ERRCODE = 'EM074',
                  HINT = 'the comparison leaves out everything of an isolated thread';
    END IF;
    SELECT * INTO r FROM ember.shadow_runs WHERE id = p.run_id;
    v_valid := p.validation_error IS NULL;

    SELECT coalesce(jsonb_agg(
        CASE WHEN x.malformed IS NOT NULL
             THEN jsonb_build_object('ordinal', x.ordinal, 'malformed', x.malformed)
             ELSE ember.comparison_pointer_json(x.ordinal, x.message_id, x.generation_id) END
        ORDER BY x.ordinal), '[]')
    INTO v_evidence
    FROM ember.comparison_parse_pointers(p.evidence) AS x;

    IF v_valid THEN
        -- The facts citing this thread in scope, as comparison_facts has them.
        v_scope := ARRAY(
            SELECT fp.fact_id FROM ember.comparison_fact_pointers AS fp
            WHERE fp.thread_id = p.thread_id
            GROUP BY fp.fact_id
            HAVING bool_or(fp.unread_reason IS NULL) AND NOT ember.comparison_fact_isolated(fp.fact_id)
        );

        SELECT to_jsonb(coalesce(array_agg(f.id ORDER BY f.id), '{}'))
        INTO v_exact
        FROM ember.facts AS f
        WHERE f.text_key = p.text_key AND f.id = ANY (v_scope);

        SELECT coalesce(jsonb_agg(jsonb_build_object('fact', n.fact_id, 'shared', n.shared) ORDER BY n.fact_id), '[]')
        INTO v_neighbours
        FROM (
            SELECT fe.fact_id, jsonb_agg(e.value ORDER BY e.ordinality) AS shared
            FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS e (value, ordinality)
            JOIN ember.fact_evidence AS fe
                ON fe.message_id = (e.value ->> 'message_id')::bigint
                OR fe.generation_id = (e.value ->> 'generation_id')::uuid
            WHERE fe.fact_id = ANY (v_scope)
            GROUP BY fe.fact_id
        ) AS n;

        SELECT coalesce(jsonb_agg(jsonb_build_object(
            'fact', s.fact_id, 'judge_run', s.judge_run_id, 'judge_model', s.model
        ) ORDER BY s.fact_id), '[]')
        INTO v_semantic
        FROM (
            SELECT DISTINCT ON (jp.fact_id) jp.fact_id, jp.judge_run_id, jp.model
            FROM ember.comparison_judged_pairs AS jp
            WHERE jp.proposal_id = p.id
              AND NOT ember.comparison_fact_isolated(jp.fact_id)
              AND EXISTS (
                  SELECT 1 FROM ember.comparison_fact_pointers AS fp
                  WHERE fp.fact_id = jp.fact_id AND fp.unread_reason IS NULL AND fp.thread_id IS NOT NULL
              )
            ORDER BY jp.fact_id, jp.finished_at DESC
        ) AS s;
    END IF;
    v_judged := EXISTS (
        SELECT 1 FROM ember.comparison_judged_items() AS j WHERE j.side = 'proposal' AND j.item_id = p.id
    );

    RETURN jsonb_build_object(
        'item', 'proposal',
        'proposal', jsonb_build_object(
            'id', p.id, 'thread', p.thread_id, 'text', p.text,
            'status', CASE WHEN v_valid THEN 'valid' ELSE 'rejected' END,
            'evidence_kind', p.evidence_kind, 'categories', to_jsonb(p.categories),
            'rejection', p.validation_error, 'rejection_class', ember.rejection_reason_class(p.validation_error),
            'forgotten', p.forgotten_by IS NOT NULL, 'created_at', p.created_at
        ),
        'evidence_kind', p.evidence_kind,
        'evidence', v_evidence,
        'acceptance', ember.explain_acceptance(p.evidence_kind, v_evidence),
        'run', jsonb_build_object(
            'id', r.id, 'path', r.path, 'model', r.model, 'status', r.status, 'reason', r.reason,
            'started_at', r.started_at, 'finished_at', r.finished_at, 'latency_ms', r.latency_ms
        ),
        'comparison', jsonb_build_object(
            'agreement', ember.comparison_agreement(
                'proposal', NOT v_valid, false, v_exact <> '[]', v_semantic <> '[]', v_neighbours <> '[]'
            ),
            'exact', v_exact,
            'evidence', v_neighbours,
            'semantic', v_semantic,
            'judged', v_judged
        )
    );
END;
$$;
