-- Comparison, continued: semantic coverage, the judge's pairs as the comparison reads them, and
-- every pair of every kind (helpers and the exact and evidence pairs in 060_comparison.sql).

-- comparison_semantic ---------------------------------------------------------------------------

-- What a judge said is the same, as far as the comparison believes it: the pairs of completed
-- runs only (a failed run stored none, and a run still open has not spoken), with the run that
-- said so. Every semantic pair, count and explain reads judged_pairs through here.
CREATE OR REPLACE VIEW ember.comparison_judged_pairs AS
SELECT
    jp.proposal_id,
    jp.fact_id,
    r.id AS judge_run_id,
    r.model,
    r.categories,
    r.finished_at
FROM ember.judged_pairs AS jp
INNER JOIN ember.judge_runs AS r ON jp.judge_run_id = r.id AND r.status = 'completed';

-- The judged pairs by id, once each: the one definition, which comparison_semantic dresses with
-- texts and its judge, and the summary counts. The proposal's thread names the pair (the judge
-- groups by label categories, not by thread, so the fact may cite another).
CREATE OR REPLACE FUNCTION ember.comparison_semantic_pairs(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (thread_id text, proposal_id bigint, fact_id bigint)
LANGUAGE sql STABLE
AS $$
    SELECT DISTINCT p.thread_id, p.proposal_id, jp.fact_id
    FROM ember.comparison_judged_pairs AS jp
    JOIN ember.comparison_proposals(p_since, p_until) AS p ON p.proposal_id = jp.proposal_id
    WHERE jp.fact_id IN (SELECT f.fact_id FROM ember.comparison_facts(p_since, p_until) AS f)
$$;

-- What a completed judge run was shown, by side and id: a fact or proposal here was judged, and
-- one in no pair was judged unmatched; one not here was never judged, which is not the same.
CREATE OR REPLACE FUNCTION ember.comparison_judged_items()
RETURNS TABLE (side text, item_id bigint)
LANGUAGE sql STABLE
AS $$
    SELECT DISTINCT 'fact'::text, x.id
    FROM ember.judge_runs AS r CROSS JOIN LATERAL unnest(r.fact_ids) AS x (id)
    WHERE r.status = 'completed'
    UNION
    SELECT DISTINCT 'proposal'::text, x.id
    FROM ember.judge_runs AS r CROSS JOIN LATERAL unnest(r.proposal_ids) AS x (id)
    WHERE r.status = 'completed'
$$;

-- Every pair of every kind, by id: what "matched" means in the drill-down and the counts of
-- steward-only facts and shadow-only proposals.
CREATE OR REPLACE FUNCTION ember.comparison_matches(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (kind text, thread_id text, proposal_id bigint, fact_id bigint)
LANGUAGE sql STABLE
AS $$
    SELECT 'exact'::text, e.thread_id, e.proposal_id, e.fact_id FROM ember.comparison_exact_pairs(p_since, p_until) AS e
    UNION ALL
    SELECT 'evidence', e.thread_id, e.proposal_id, e.fact_id FROM ember.comparison_evidence_pairs(p_since, p_until) AS e
    UNION ALL
    SELECT 'semantic', s.thread_id, s.proposal_id, s.fact_id FROM ember.comparison_semantic_pairs(p_since, p_until) AS s
$$;

CREATE OR REPLACE FUNCTION ember.comparison_semantic(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    thread_id text,
    proposal_id bigint,
    fact_id bigint,
    proposal_text text,
    fact_text text,
    categories text[],
    judge_run_id bigint,
    judge_model text,
    judged_at timestamptz,
    label text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH f AS (
        SELECT DISTINCT cf.fact_id, cf.text FROM ember.comparison_facts(p_since, p_until) AS cf
    )
    SELECT DISTINCT ON (p.proposal_id, jp.fact_id)
        p.thread_id, p.proposal_id, jp.fact_id, p.text, f.text, jp.categories, jp.judge_run_id, jp.model,
        jp.finished_at, 'reviewable pair, not truth'::text
    FROM ember.comparison_judged_pairs AS jp
    JOIN ember.comparison_proposals(p_since, p_until) AS p ON p.proposal_id = jp.proposal_id
    JOIN f ON f.fact_id = jp.fact_id
    ORDER BY p.proposal_id, jp.fact_id, jp.finished_at DESC;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_semantic AS
SELECT * FROM ember.comparison_semantic(NULL, NULL);

COMMENT ON VIEW ember.comparison_semantic IS
'Semantic pairs: a valid shadow proposal and a steward fact that a light model (routed for exactly the
pair''s label categories) judged to say the same thing. Reviewable pairs, not truth: read them before
trusting the number. Windowed: ember.comparison_semantic(since, until). No isolated thread.';
