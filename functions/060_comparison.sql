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

-- Why shadow never reads a thread, or NULL when it may: main (its reading moves to progress
-- reports, seed 000 section 3) and the steward's own record. Isolated threads are not named here:
-- the comparison leaves them out altogether. The rule is ember.shadow_excluded
-- (040_shadow_signals.sql); this only gives each case of it words, and pgTAP holds the two equal
-- for every thread kind.
CREATE OR REPLACE FUNCTION ember.shadow_unread_thread_reason(p_thread text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN ember.is_isolated(p_thread) THEN 'isolated: nothing automated reads it'
        WHEN ember.is_steward_thread(p_thread) THEN 'steward record: shadow never reads it'
        WHEN ember.shadow_excluded(ember.sole_tenant(), p_thread) THEN 'main: shadow never reads main'
    END
$$;

-- The threads shadow never reads and the comparison still shows (main, the steward's record),
-- with the reason, computed once per thread rather than once per pointer.
CREATE OR REPLACE VIEW ember.comparison_unread_threads AS
SELECT
    t.id AS thread_id,
    ember.shadow_unread_thread_reason(t.id) AS reason
FROM ember.threads AS t
WHERE ember.shadow_excluded(t.tenant_id, t.id) AND NOT ember.is_isolated(t.tenant_id, t.id);

-- Every pointer of every fact, resolved to the thread it points into, with why shadow could never
-- have read the row it names (unread_reason, NULL when shadow reads it): a thread shadow never
-- reads, or a row at or below the shadow cursor's baseline of its generation (seed 000 section 7:
-- history from before activation is skipped on purpose, so it cannot count against shadow). A
-- generation pointer is unread when every row of that generation is below the baseline. A
-- generation with no cursor is read from its start, as ember.shadow_read_position has it.
CREATE OR REPLACE VIEW ember.comparison_fact_pointers AS
SELECT
    fe.fact_id,
    fe.ordinal,
    fe.message_id,
    fe.generation_id,
    coalesce(m.thread_id, g.thread_id) AS thread_id,
    CASE
        WHEN u.thread_id IS NOT NULL THEN u.reason
        WHEN c.initialization = 'steward' AND (m.seq <= c.baseline_seq OR gp.last_seq <= c.baseline_seq)
            THEN 'before activation: the steward had digested it'
        WHEN m.seq <= c.baseline_seq OR gp.last_seq <= c.baseline_seq
            THEN 'before activation: history shadow skips'
    END AS unread_reason
FROM ember.fact_evidence AS fe
LEFT JOIN ember.messages AS m ON fe.message_id = m.id
LEFT JOIN ember.generations AS g ON fe.generation_id = g.id
LEFT JOIN ember.generation_progress AS gp ON g.id = gp.generation_id
LEFT JOIN ember.comparison_unread_threads AS u ON u.thread_id = coalesce(m.thread_id, g.thread_id)
LEFT JOIN ember.shadow_cursors AS c
    ON c.thread_id = coalesce(m.thread_id, g.thread_id) AND c.generation_id = coalesce(m.generation_id, g.id);

-- Why shadow could not have read any of a fact's rows in one thread, from the unread_reason of
-- each of its pointers there in ordinal order: NULL as soon as shadow reads one of them, the first
-- pointer's reason otherwise. The one rule of a fact's exclusion, for comparison_all_facts and
-- the analyst's explain (088_explain_analyst.sql); a plain SQL function, so it inlines into both.
CREATE OR REPLACE FUNCTION ember.comparison_excluded_reason(p_unread_reasons text[])
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN array_position(p_unread_reasons, NULL) IS NULL THEN p_unread_reasons[1] END
$$;

-- Facts of a window that touch no isolated thread, once per thread they point into, with why
-- shadow could not have read any of the fact's rows in that thread (excluded_reason: the first
-- pointer's reason; NULL when shadow reads at least one). The isolated facts are found once, as a
-- set (NOT IN a hashed subplan), rather than asked per pointer.
CREATE OR REPLACE FUNCTION ember.comparison_all_facts(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    fact_id bigint, thread_id text, text text, text_key text, categories text[], created_at timestamptz,
    excluded_reason text
)
LANGUAGE sql STABLE
AS $$
    -- The window is applied to the facts before their pointers are grouped, so a day of
    -- comparison_daily groups that day's pointers, not all of them.
    WITH f AS MATERIALIZED (
        SELECT f.id, f.text, f.text_key, f.categories, f.created_at
        FROM ember.facts AS f
        WHERE ember.comparison_in_window(f.created_at, p_since, p_until)
    )
    SELECT f.id, t.thread_id, f.text, f.text_key, f.categories, f.created_at, t.excluded_reason
    FROM (
        SELECT fp.fact_id, fp.thread_id,
               ember.comparison_excluded_reason(array_agg(fp.unread_reason ORDER BY fp.ordinal)) AS excluded_reason
        FROM ember.comparison_fact_pointers AS fp
        WHERE fp.thread_id IS NOT NULL AND fp.fact_id IN (SELECT f.id FROM f)
        GROUP BY fp.fact_id, fp.thread_id
    ) AS t
    JOIN f ON f.id = t.fact_id
    WHERE f.id NOT IN (
        SELECT x.fact_id FROM ember.comparison_fact_pointers AS x
        WHERE x.thread_id IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
    )
$$;

-- The facts shadow's coverage is measured against: comparison_all_facts less what shadow could
-- never have read. Every coverage's denominator, and every pair, comes from here, so a fact of
-- main neither counts against shadow nor pairs with a proposal.
CREATE OR REPLACE FUNCTION ember.comparison_facts(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    fact_id bigint, thread_id text, text text, text_key text, categories text[], created_at timestamptz
)
LANGUAGE sql STABLE
AS $$
    SELECT a.fact_id, a.thread_id, a.text, a.text_key, a.categories, a.created_at
    FROM ember.comparison_all_facts(p_since, p_until) AS a
    WHERE a.excluded_reason IS NULL
$$;

-- Every proposal of a window, valid or rejected, on threads that are not isolated: the one scope
-- of the proposals the comparison shows (the pairs, the summary's counts, the items, the rejected
-- and their evidence), as comparison_all_facts is of the facts.
CREATE OR REPLACE FUNCTION ember.comparison_window_proposals(p_since timestamptz, p_until timestamptz)
RETURNS SETOF ember.shadow_proposals
LANGUAGE sql STABLE
AS $$
    SELECT p.*
    FROM ember.shadow_proposals AS p
    WHERE p.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
      AND ember.comparison_in_window(p.created_at, p_since, p_until)
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
    FROM ember.comparison_window_proposals(p_since, p_until) AS p
    WHERE p.validation_error IS NULL
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
