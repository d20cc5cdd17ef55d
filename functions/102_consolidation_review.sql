-- The review queue (issue 25, item 4): what the consolidation job would not decide alone. A
-- contradiction it flagged, and a merge, supersede or retire below consolidation_min_confidence,
-- wait here for a person; accepting or rejecting one records who and when, and accepting a
-- held-back action applies it through the same checks as the job's own (which may refuse it now).

-- Every item a person has to decide or has decided: what the job flagged or held back, with the
-- facts it names as they are now and, once decided, the decision with who, when, the note and the
-- fact an accepted action wrote. An item that names a fact derived from an isolated thread is left
-- out, as search_memory leaves the fact out: such facts are never in a consolidation group, but a
-- thread may be sealed after the run that queued the item (accepting it is refused too:
-- consolidation_apply).
CREATE OR REPLACE VIEW ember.review_items AS
SELECT
    a.id AS action_id,
    a.run_id,
    CASE WHEN a.action = 'flag' THEN 'contradiction' ELSE 'low-confidence ' || a.action END AS item,
    a.action,
    a.confidence,
    a.reason,
    a.text AS proposed_text,
    a.evidence,
    (
        SELECT
            jsonb_agg(jsonb_build_object(
                'id', f.id, 'text', f.text, 'status', f.status,
                'evidence_kind', f.evidence_kind, 'valid_from', f.valid_from,
                'valid_until', f.valid_until
            )
            ORDER BY array_position(a.fact_ids, f.id))
        FROM ember.facts AS f
        WHERE f.id = any(a.fact_ids)
    ) AS facts,
    a.created_at,
    a.status,
    a.review,
    a.reviewed_by,
    a.reviewed_at,
    a.review_note,
    a.result_fact
FROM ember.consolidation_actions AS a
WHERE
    (a.status = 'flagged' OR a.review IS NOT NULL)
    AND NOT EXISTS (
        SELECT 1 FROM ember.facts AS f
        WHERE f.id = any(a.fact_ids) AND NOT ember.fact_visible(TRUE, '{}', f.categories, f.source_threads)
    );

-- The open queue, oldest first: the items no one has decided yet.
CREATE OR REPLACE VIEW ember.review_queue AS
SELECT
    r.action_id,
    r.run_id,
    r.item,
    r.action,
    r.confidence,
    r.reason,
    r.proposed_text,
    r.evidence,
    r.facts,
    r.created_at
FROM ember.review_items AS r
WHERE r.status = 'flagged' AND r.review IS NULL
ORDER BY r.created_at, r.action_id;

COMMENT ON VIEW ember.review_queue IS
'Consolidation actions waiting for a person: item is contradiction (the job flagged it) or low-confidence merge,
supersede or retire (below consolidation_min_confidence, not applied). Decide with
ember.review_consolidation_action(action_id, accept|reject, who).';

-- Decide one queued item. Refused (EM136): an unknown action, one that is not waiting (applied,
-- refused, or decided already), a decision other than accept or reject, or no name. Accepting a
-- held-back merge, supersede or retire applies it now (EM135 when a check refuses it, and the
-- item stays queued); accepting a flag records that the person agrees, and changes no fact.
CREATE OR REPLACE FUNCTION ember.review_consolidation_action(
    p_action bigint, p_decision text, p_by text, p_note text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    a ember.consolidation_actions;
    v_fact bigint;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_decision IS NULL OR p_decision NOT IN ('accept', 'reject') THEN
        RAISE EXCEPTION 'a review decides accept or reject, got %', coalesce(p_decision, 'none') USING ERRCODE = 'EM136';
    END IF;
    IF p_by IS NULL OR btrim(p_by) = '' THEN
        RAISE EXCEPTION 'a review names who decided' USING ERRCODE = 'EM136';
    END IF;
    SELECT * INTO a FROM ember.consolidation_actions WHERE id = p_action FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no consolidation action %', coalesce(p_action::text, 'NULL') USING ERRCODE = 'EM136';
    END IF;
    IF a.status <> 'flagged' OR a.review IS NOT NULL THEN
        RAISE EXCEPTION 'consolidation action % is not waiting for review (it is %)', p_action,
            CASE WHEN a.review IS NOT NULL THEN a.review ELSE a.status END
            USING ERRCODE = 'EM136';
    END IF;
    -- An item naming a fact of a thread sealed since is out of the queue (review_items), and out
    -- of reach: no decision about it is taken, as no automated change touches such a fact.
    IF EXISTS (SELECT 1 FROM ember.facts AS f
               WHERE f.id = any(a.fact_ids) AND NOT ember.fact_visible(TRUE, '{}', f.categories, f.source_threads)) THEN
        RAISE EXCEPTION 'consolidation action % is not waiting for review (it names a fact of a thread sealed since)',
            p_action
            USING ERRCODE = 'EM136';
    END IF;
    IF p_decision = 'accept' AND a.action <> 'flag' THEN
        v_fact := ember.consolidation_apply(a.run_id, a.id, a.action, a.fact_ids, a.text,
                                            a.reason || ' (accepted by ' || p_by || ')', p_now);
        UPDATE ember.consolidation_actions
        SET status = 'applied', result_fact = v_fact, review = 'accepted', reviewed_by = p_by, reviewed_at = p_now,
            review_note = p_note
        WHERE id = a.id;
    ELSE
        UPDATE ember.consolidation_actions
        SET review = CASE p_decision WHEN 'accept' THEN 'accepted' ELSE 'rejected' END,
            reviewed_by = p_by, reviewed_at = p_now, review_note = p_note
        WHERE id = a.id;
    END IF;
    RETURN jsonb_build_object('action_id', a.id, 'action', a.action,
                              'review', CASE p_decision WHEN 'accept' THEN 'accepted' ELSE 'rejected' END,
                              'applied', p_decision = 'accept' AND a.action <> 'flag', 'result_fact', v_fact,
                              'reviewed_by', p_by, 'reviewed_at', p_now);
END;
$$;

-- The review queue as the analyst sees it (ember compare's report): every queued item, waiting
-- or decided (with who and when), its facts' texts cut to analyst_row_chars. An item naming a
-- fact derived from a thread sealed since is left out: nothing of an isolated thread reaches the
-- analyst.
CREATE OR REPLACE FUNCTION ember.comparison_review_queue()
RETURNS TABLE (
    action_id bigint,
    run_id bigint,
    item text,
    confidence numeric,
    reason text,
    facts jsonb,
    review text,
    reviewed_by text,
    reviewed_at timestamptz,
    created_at timestamptz
)
LANGUAGE sql STABLE
AS $$
    SELECT
        a.id,
        a.run_id,
        CASE WHEN a.action = 'flag' THEN 'contradiction' ELSE 'low-confidence ' || a.action END,
        a.confidence,
        left(a.reason, ember.setting_int('analyst_row_chars')),
        (
            SELECT jsonb_agg(jsonb_build_object(
                'id', f.id, 'status', f.status,
                'text', left(f.text, ember.setting_int('analyst_row_chars'))
            ) ORDER BY array_position(a.fact_ids, f.id))
            FROM ember.facts AS f
            WHERE f.id = any(a.fact_ids)
        ),
        a.review,
        a.reviewed_by,
        a.reviewed_at,
        a.created_at
    FROM ember.consolidation_actions AS a
    WHERE
        (a.status = 'flagged' OR a.review IS NOT NULL)
        AND NOT EXISTS (
            SELECT 1 FROM ember.facts AS f
            CROSS JOIN LATERAL unnest(f.source_threads) AS s (thread_id)
            WHERE f.id = any(a.fact_ids) AND ember.is_isolated(s.thread_id)
        )
    ORDER BY a.review IS NOT NULL, a.created_at, a.id
$$;
