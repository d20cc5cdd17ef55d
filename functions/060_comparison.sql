-- Comparison (seed 000 section 6): shadow proposals against steward facts, in SQL, so every column
-- means the same thing in psql, in `ember compare` and in any other tool.
--
-- Three coverages are kept apart and never added up: exact (equal text after normalization),
-- evidence (shared pointers: neighbours, not coverage of meaning) and semantic (pairs a light
-- model judged equivalent: reviewable, not truth). Nothing of an isolated thread appears: a
-- proposal of a thread sealed later is dropped, and so is a fact with any pointer into one.
--
-- The pair and summary functions raise work_mem for themselves (SET work_mem): they sort and hash
-- every proposal and fact of the window, and at 100,000 of each the default 4MB spills those
-- sorts to disk, which made the summary grow faster than the data (bench/b5_comparison.py).
--
-- Each comparison is a function over a window [p_since, p_until) (NULL = open end) and a view of
-- the same name over all time. The functions are SECURITY DEFINER so that ember_analyst, which
-- may read no table, can still ask for a window; they return nothing that the views would not.

-- normalize_fact_text(), the comparison key of a text, is defined in db/migrations/0017: the stored
-- text_key columns of facts and shadow_proposals are computed with it, so it changes only with a
-- migration that recomputes them.

-- A window is [since, until); an empty or reversed one is a mistake worth naming.
CREATE OR REPLACE FUNCTION ember.comparison_check_window(p_since timestamptz, p_until timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_since IS NOT NULL AND p_until IS NOT NULL AND p_since >= p_until THEN
        RAISE EXCEPTION 'comparison window: since % is not before until %', p_since, p_until
            USING ERRCODE = 'EM070', HINT = 'a window is [since, until); leave either end NULL for open';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION ember.comparison_in_window(p_at timestamptz, p_since timestamptz, p_until timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (p_since IS NULL OR p_at >= p_since) AND (p_until IS NULL OR p_at < p_until)
$$;

-- The threads the comparison never shows (is_isolated decides). Callers exclude them with
-- NOT IN, which the planner evaluates once as a hashed set: joining "open threads" instead let
-- it ask is_isolated again for every result row.
CREATE OR REPLACE VIEW ember.comparison_isolated_threads AS
SELECT t.id AS thread_id
FROM ember.threads AS t
WHERE ember.is_isolated(t.id);

-- Every pointer of every fact, resolved to the thread it points into.
CREATE OR REPLACE VIEW ember.comparison_fact_pointers AS
SELECT
    fe.fact_id,
    fe.ordinal,
    fe.message_id,
    fe.generation_id,
    coalesce(m.thread_id, g.thread_id) AS thread_id
FROM ember.fact_evidence AS fe
LEFT JOIN ember.messages AS m ON fe.message_id = m.id
LEFT JOIN ember.generations AS g ON fe.generation_id = g.id;

-- Facts of a window that touch no isolated thread, once per thread they point into. The isolated
-- facts are found once, as a set (NOT IN a hashed subplan), rather than asked per pointer.
CREATE OR REPLACE FUNCTION ember.comparison_facts(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    fact_id bigint, thread_id text, text text, text_key text, categories text[], created_at timestamptz
)
LANGUAGE sql STABLE
AS $$
    SELECT f.id, t.thread_id, f.text, f.text_key, f.categories, f.created_at
    FROM (
        SELECT DISTINCT fp.fact_id, fp.thread_id
        FROM ember.comparison_fact_pointers AS fp
        WHERE fp.thread_id IS NOT NULL
    ) AS t
    JOIN ember.facts AS f ON f.id = t.fact_id
    WHERE ember.comparison_in_window(f.created_at, p_since, p_until)
      AND f.id NOT IN (
          SELECT x.fact_id FROM ember.comparison_fact_pointers AS x
          WHERE x.thread_id IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
      )
$$;

-- Valid (not rejected) proposals of a window on threads that are not isolated.
CREATE OR REPLACE FUNCTION ember.comparison_proposals(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    proposal_id bigint, thread_id text, text text, text_key text, categories text[], evidence jsonb,
    created_at timestamptz
)
LANGUAGE sql STABLE
AS $$
    SELECT p.id, p.thread_id, p.text, p.text_key, p.categories, p.evidence, p.created_at
    FROM ember.shadow_proposals AS p
    WHERE p.validation_error IS NULL
      AND p.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
      AND ember.comparison_in_window(p.created_at, p_since, p_until)
$$;

-- comparison_exact ------------------------------------------------------------------------------

-- The exact pairs by id: the one definition, which comparison_exact dresses with texts and the
-- summary counts (a plain SQL function, so the planner inlines it into either).
CREATE OR REPLACE FUNCTION ember.comparison_exact_pairs(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (thread_id text, proposal_id bigint, fact_id bigint)
LANGUAGE sql STABLE
AS $$
    SELECT p.thread_id, p.proposal_id, f.fact_id
    FROM ember.comparison_proposals(p_since, p_until) AS p
    JOIN ember.comparison_facts(p_since, p_until) AS f ON f.thread_id = p.thread_id AND f.text_key = p.text_key
$$;

CREATE OR REPLACE FUNCTION ember.comparison_exact(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    thread_id text,
    proposal_id bigint,
    fact_id bigint,
    proposal_text text,
    fact_text text,
    normalized_text text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT e.thread_id, e.proposal_id, e.fact_id, p.text, f.text, p.text_key
    FROM ember.comparison_exact_pairs(p_since, p_until) AS e
    JOIN ember.shadow_proposals AS p ON p.id = e.proposal_id
    JOIN ember.facts AS f ON f.id = e.fact_id
    ORDER BY e.thread_id, e.proposal_id, e.fact_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_exact AS
SELECT * FROM ember.comparison_exact(NULL, NULL);

COMMENT ON VIEW ember.comparison_exact IS
'Exact coverage: a shadow proposal (valid) and a steward fact of the same thread whose texts are equal after
normalize_fact_text (NFKC, case folding, no whitespace or punctuation, CJK punctuation included). A reworded
fact is not counted here. Windowed: ember.comparison_exact(since, until). No isolated thread.';

-- comparison_evidence ---------------------------------------------------------------------------

-- The pointers of a valid proposal. Valid rows have a checked shape (the proposal guard), so the
-- casts cannot fail.
CREATE OR REPLACE FUNCTION ember.comparison_proposal_pointers(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (proposal_id bigint, thread_id text, message_id bigint, generation_id uuid)
LANGUAGE sql STABLE
AS $$
    SELECT p.proposal_id, p.thread_id, (e.value ->> 'message_id')::bigint, (e.value ->> 'generation_id')::uuid
    FROM ember.comparison_proposals(p_since, p_until) AS p
    CROSS JOIN LATERAL jsonb_array_elements(p.evidence) AS e (value)
$$;

-- The evidence pairs by id, with the pointers they share: the one definition, which
-- comparison_evidence dresses with texts and the summary counts.
CREATE OR REPLACE FUNCTION ember.comparison_evidence_pairs(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    thread_id text, proposal_id bigint, fact_id bigint, message_ids bigint[], generation_ids uuid[]
)
LANGUAGE sql STABLE
AS $$
    WITH pp AS MATERIALIZED (
        SELECT * FROM ember.comparison_proposal_pointers(p_since, p_until)
    ),
    -- A pointer is a message or a generation, never both, so the two halves never overlap.
    shared AS (
        SELECT pp.thread_id, pp.proposal_id, fe.fact_id, pp.message_id, NULL::uuid AS generation_id
        FROM pp
        JOIN ember.fact_evidence AS fe ON fe.message_id = pp.message_id
        WHERE pp.message_id IS NOT NULL
        UNION ALL
        SELECT pp.thread_id, pp.proposal_id, fe.fact_id, NULL::bigint, pp.generation_id
        FROM pp
        JOIN ember.fact_evidence AS fe ON fe.generation_id = pp.generation_id
        WHERE pp.generation_id IS NOT NULL
    ),
    pairs AS (
        SELECT sh.thread_id, sh.proposal_id, sh.fact_id,
               array_agg(DISTINCT sh.message_id ORDER BY sh.message_id)
                   FILTER (WHERE sh.message_id IS NOT NULL) AS message_ids,
               array_agg(DISTINCT sh.generation_id ORDER BY sh.generation_id)
                   FILTER (WHERE sh.generation_id IS NOT NULL) AS generation_ids
        FROM shared AS sh
        GROUP BY sh.thread_id, sh.proposal_id, sh.fact_id
    )
    SELECT s.thread_id, s.proposal_id, s.fact_id, s.message_ids, s.generation_ids
    FROM pairs AS s
    WHERE EXISTS (
        SELECT 1 FROM ember.comparison_facts(p_since, p_until) AS f
        WHERE f.fact_id = s.fact_id AND f.thread_id = s.thread_id
    )
$$;

CREATE OR REPLACE FUNCTION ember.comparison_evidence(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    thread_id text,
    proposal_id bigint,
    fact_id bigint,
    proposal_text text,
    fact_text text,
    shared_message_ids bigint[],
    shared_generation_ids uuid[],
    relation text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT s.thread_id, s.proposal_id, s.fact_id, p.text, f.text, s.message_ids, s.generation_ids,
           'neighbour'::text
    FROM ember.comparison_evidence_pairs(p_since, p_until) AS s
    JOIN ember.shadow_proposals AS p ON p.id = s.proposal_id
    JOIN ember.facts AS f ON f.id = s.fact_id
    ORDER BY s.thread_id, s.proposal_id, s.fact_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_evidence AS
SELECT * FROM ember.comparison_evidence(NULL, NULL);

COMMENT ON VIEW ember.comparison_evidence IS
'Evidence neighbours: a valid shadow proposal and a steward fact of the same thread whose evidence pointers
intersect (same message or same generation). The same evidence can support different facts, so a pair here
is a neighbour, NOT semantic coverage; shared evidence is reported separately and never claimed as
coverage. Windowed: ember.comparison_evidence(since, until). No isolated thread.';

-- comparison_semantic ---------------------------------------------------------------------------

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
        p.thread_id, p.proposal_id, jp.fact_id, p.text, f.text, r.categories, r.id, r.model, r.finished_at,
        'reviewable pair, not truth'::text
    FROM ember.judged_pairs AS jp
    JOIN ember.judge_runs AS r ON r.id = jp.judge_run_id AND r.status = 'completed'
    JOIN ember.comparison_proposals(p_since, p_until) AS p ON p.proposal_id = jp.proposal_id
    JOIN f ON f.fact_id = jp.fact_id
    ORDER BY p.proposal_id, jp.fact_id, r.finished_at DESC;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_semantic AS
SELECT * FROM ember.comparison_semantic(NULL, NULL);

COMMENT ON VIEW ember.comparison_semantic IS
'Semantic pairs: a valid shadow proposal and a steward fact that a light model (routed for exactly the
pair''s label categories) judged to say the same thing. Reviewable pairs, not truth: read them before
trusting the number. Windowed: ember.comparison_semantic(since, until). No isolated thread.';
