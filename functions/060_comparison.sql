-- Comparison (seed 000 section 6): shadow proposals against steward facts, in SQL, so every column
-- means the same thing in psql, in `ember compare` and in any other tool.
--
-- Three coverages are kept apart and never added up: exact (equal text after normalization),
-- evidence (shared pointers: neighbours, not coverage of meaning) and semantic (pairs a light
-- model judged equivalent: reviewable, not truth). Nothing of an isolated thread appears: a
-- proposal of a thread sealed later is dropped, and so is a fact with any pointer into one.
--
-- Each comparison is a function over a window [p_since, p_until) (NULL = open end) and a view of
-- the same name over all time. The functions are SECURITY DEFINER so that ember_analyst, which
-- may read no table, can still ask for a window; they return nothing that the views would not.

-- Text equality for comparison: Unicode NFKC (full-width forms fold to ASCII, compatibility
-- ligatures split), case folding, then no whitespace and no punctuation, CJK punctuation
-- included. PostgreSQL 18 has casefold(), which folds more than lower() (German sharp s, final
-- sigma); on older servers lower() is the closest there is, so the body is chosen when migrating.
DO $do$
DECLARE
    v_fold text := CASE WHEN current_setting('server_version_num')::int >= 180000 THEN 'casefold' ELSE 'lower' END;
BEGIN
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION ember.normalize_fact_text(p_text text)
        RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $body$
            SELECT regexp_replace(
                %s(normalize(p_text, NFKC)),
                '[[:space:][:punct:]\u00a1\u00a7\u00ab\u00b6\u00b7\u00bb\u00bf\u2000-\u206f\u2e00-\u2e7f'
                '\u3000-\u303f\u30fb\ufe10-\ufe1f\ufe30-\ufe4f\ufe50-\ufe6b\uff01-\uff0f\uff1a-\uff20'
                '\uff3b-\uff40\uff5b-\uff65]+',
                '', 'g'
            )
        $body$
    $f$, v_fold);
END;
$do$;

COMMENT ON FUNCTION ember.normalize_fact_text(text) IS
'Comparison key of a fact text: NFKC, case folded, whitespace and punctuation (CJK included) removed.';

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

-- The threads the comparison may show: every thread that is not isolated (is_isolated decides).
CREATE OR REPLACE VIEW ember.comparison_open_threads AS
SELECT t.id AS thread_id
FROM ember.threads AS t
WHERE NOT ember.is_isolated(t.id);

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

-- Facts of a window that touch no isolated thread, once per thread they point into.
CREATE OR REPLACE FUNCTION ember.comparison_facts(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (fact_id bigint, thread_id text, text text, categories text[], created_at timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT DISTINCT f.id, fp.thread_id, f.text, f.categories, f.created_at
    FROM ember.facts AS f
    JOIN ember.comparison_fact_pointers AS fp ON fp.fact_id = f.id
    WHERE ember.comparison_in_window(f.created_at, p_since, p_until)
      AND fp.thread_id IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM ember.comparison_fact_pointers AS x
          WHERE x.fact_id = f.id AND ember.is_isolated(x.thread_id)
      )
$$;

-- Valid (not rejected) proposals of a window on threads that are not isolated.
CREATE OR REPLACE FUNCTION ember.comparison_proposals(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    proposal_id bigint, thread_id text, text text, categories text[], evidence jsonb, created_at timestamptz
)
LANGUAGE sql STABLE
AS $$
    SELECT p.id, p.thread_id, p.text, p.categories, p.evidence, p.created_at
    FROM ember.shadow_proposals AS p
    JOIN ember.comparison_open_threads AS o ON o.thread_id = p.thread_id
    WHERE p.validation_error IS NULL
      AND ember.comparison_in_window(p.created_at, p_since, p_until)
$$;

-- comparison_exact ------------------------------------------------------------------------------

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
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH p AS (
        SELECT cp.*, ember.normalize_fact_text(cp.text) AS norm
        FROM ember.comparison_proposals(p_since, p_until) AS cp
    ),
    f AS (
        SELECT cf.*, ember.normalize_fact_text(cf.text) AS norm
        FROM ember.comparison_facts(p_since, p_until) AS cf
    )
    SELECT p.thread_id, p.proposal_id, f.fact_id, p.text, f.text, p.norm
    FROM p
    JOIN f ON f.thread_id = p.thread_id AND f.norm = p.norm
    ORDER BY p.thread_id, p.proposal_id, f.fact_id;
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
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH pp AS (
        SELECT * FROM ember.comparison_proposal_pointers(p_since, p_until)
    ),
    f AS (
        SELECT * FROM ember.comparison_facts(p_since, p_until)
    ),
    shared AS (
        SELECT pp.thread_id, pp.proposal_id, fp.fact_id, pp.message_id, pp.generation_id
        FROM pp
        JOIN ember.fact_evidence AS fp ON fp.message_id = pp.message_id
        UNION
        SELECT pp.thread_id, pp.proposal_id, fp.fact_id, pp.message_id, pp.generation_id
        FROM pp
        JOIN ember.fact_evidence AS fp ON fp.generation_id = pp.generation_id
    )
    SELECT s.thread_id, s.proposal_id, s.fact_id, p.text, f.text,
           array_agg(DISTINCT s.message_id ORDER BY s.message_id) FILTER (WHERE s.message_id IS NOT NULL),
           array_agg(DISTINCT s.generation_id ORDER BY s.generation_id) FILTER (WHERE s.generation_id IS NOT NULL),
           'neighbour'::text
    FROM shared AS s
    JOIN f ON f.fact_id = s.fact_id AND f.thread_id = s.thread_id
    JOIN ember.shadow_proposals AS p ON p.id = s.proposal_id
    GROUP BY s.thread_id, s.proposal_id, s.fact_id, p.text, f.text
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
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT DISTINCT ON (p.proposal_id, jp.fact_id)
        p.thread_id, p.proposal_id, jp.fact_id, p.text, fct.text, r.categories, r.id, r.model, r.finished_at,
        'reviewable pair, not truth'::text
    FROM ember.judged_pairs AS jp
    JOIN ember.judge_runs AS r ON r.id = jp.judge_run_id AND r.status = 'completed'
    JOIN ember.comparison_proposals(p_since, p_until) AS p ON p.proposal_id = jp.proposal_id
    JOIN ember.facts AS fct ON fct.id = jp.fact_id
    WHERE EXISTS (SELECT 1 FROM ember.comparison_facts(p_since, p_until) AS f WHERE f.fact_id = jp.fact_id)
    ORDER BY p.proposal_id, jp.fact_id, r.finished_at DESC;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_semantic AS
SELECT * FROM ember.comparison_semantic(NULL, NULL);

COMMENT ON VIEW ember.comparison_semantic IS
'Semantic pairs: a valid shadow proposal and a steward fact that a light model (routed for exactly the
pair''s label categories) judged to say the same thing. Reviewable pairs, not truth: read them before
trusting the number. Windowed: ember.comparison_semantic(since, until). No isolated thread.';

-- comparison_cost and comparison_latency --------------------------------------------------------

-- Every run of every pipeline with its usage and price snapshot, in one shape. Shadow runs of an
-- isolated thread are left out like everything else of such a thread.
CREATE OR REPLACE VIEW ember.comparison_runs AS
SELECT
    'steward'::text AS pipeline, s.model, s.status, s.started_at, s.latency_ms,
    s.input_tokens, s.cache_read_tokens, s.cache_write_5m_tokens, s.cache_write_1h_tokens, s.output_tokens,
    s.price_input, s.price_output, s.price_cache_write_5m, s.price_cache_write_1h, s.price_cache_read
FROM ember.steward_runs AS s
UNION ALL
SELECT
    'shadow ' || r.path, r.model, r.status, r.started_at, r.latency_ms,
    r.input_tokens, r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens, r.output_tokens,
    r.price_input, r.price_output, r.price_cache_write_5m, r.price_cache_write_1h, r.price_cache_read
FROM ember.shadow_runs AS r
JOIN ember.comparison_open_threads AS o ON r.thread_id = o.thread_id
UNION ALL
SELECT
    'semantic judge', j.model, j.status, j.started_at, j.latency_ms,
    j.input_tokens, j.cache_read_tokens, j.cache_write_5m_tokens, j.cache_write_1h_tokens, j.output_tokens,
    j.price_input, j.price_output, j.price_cache_write_5m, j.price_cache_write_1h, j.price_cache_read
FROM ember.judge_runs AS j;

-- A run's list-price estimate in USD, or NULL when any price of its snapshot is missing.
CREATE OR REPLACE FUNCTION ember.run_usd(r ember.comparison_runs)
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT (
        r.input_tokens * r.price_input
        + r.output_tokens * r.price_output
        + r.cache_write_5m_tokens * r.price_cache_write_5m
        + r.cache_write_1h_tokens * r.price_cache_write_1h
        + r.cache_read_tokens * r.price_cache_read
    ) / 1000000.0
$$;

CREATE OR REPLACE FUNCTION ember.comparison_cost(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    pipeline text,
    model text,
    status text,
    runs bigint,
    input_tokens numeric,
    cache_read_tokens numeric,
    cache_write_5m_tokens numeric,
    cache_write_1h_tokens numeric,
    output_tokens numeric,
    runs_without_price bigint,
    estimated_usd numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT r.pipeline, r.model, r.status, count(*),
           sum(r.input_tokens), sum(r.cache_read_tokens), sum(r.cache_write_5m_tokens),
           sum(r.cache_write_1h_tokens), sum(r.output_tokens),
           count(*) FILTER (WHERE ember.run_usd(r) IS NULL),
           -- A missing price makes the whole group unknown: never a smaller total.
           CASE WHEN bool_and(ember.run_usd(r) IS NOT NULL) THEN round(sum(ember.run_usd(r)), 6) END
    FROM ember.comparison_runs AS r
    WHERE ember.comparison_in_window(r.started_at, p_since, p_until)
    GROUP BY r.pipeline, r.model, r.status
    ORDER BY r.pipeline, r.model, r.status;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_cost AS
SELECT * FROM ember.comparison_cost(NULL, NULL);

COMMENT ON VIEW ember.comparison_cost IS
'Cost by pipeline (steward, shadow hot, shadow cold, semantic judge) x model x status: runs, tokens by kind,
and estimated USD from each run''s own list-price snapshot. A list-price snapshot, not subscription billing.
estimated_usd is NULL for a group when any of its runs lacks a price (runs_without_price), never a smaller
total. Windowed by run start: ember.comparison_cost(since, until). No run of an isolated thread.';

CREATE OR REPLACE FUNCTION ember.comparison_latency(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    pipeline text,
    model text,
    runs bigint,
    p50_ms double precision,
    p95_ms double precision,
    max_ms bigint
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT r.pipeline, r.model, count(*),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms),
           max(r.latency_ms)
    FROM ember.comparison_runs AS r
    WHERE r.latency_ms IS NOT NULL
      AND ember.comparison_in_window(r.started_at, p_since, p_until)
    GROUP BY r.pipeline, r.model
    ORDER BY r.pipeline, r.model;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_latency AS
SELECT * FROM ember.comparison_latency(NULL, NULL);

COMMENT ON VIEW ember.comparison_latency IS
'Latency of finished runs (those with a latency_ms) by pipeline and model: p50 and p95 (continuous
percentiles) and max, in milliseconds. Windowed by run start: ember.comparison_latency(since, until).';

-- comparison_evidence_quality -------------------------------------------------------------------

CREATE OR REPLACE FUNCTION ember.comparison_evidence_quality(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    source text,
    item_id bigint,
    thread_id text,
    evidence_kind text,
    ordinal bigint,
    message_id bigint,
    generation_id uuid,
    target_exists boolean,
    problem text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH ptr AS (
        SELECT 'shadow'::text AS source, p.proposal_id AS item_id, p.thread_id AS item_thread,
               sp.evidence_kind, e.ordinality AS ordinal,
               (e.value ->> 'message_id')::bigint AS message_id,
               (e.value ->> 'generation_id')::uuid AS generation_id
        FROM ember.comparison_proposals(p_since, p_until) AS p
        JOIN ember.shadow_proposals AS sp ON sp.id = p.proposal_id
        CROSS JOIN LATERAL jsonb_array_elements(p.evidence) WITH ORDINALITY AS e (value, ordinality)
        UNION ALL
        SELECT 'steward', f.id,
               -- A fact's own thread is that of its first pointer.
               (SELECT fp.thread_id FROM ember.comparison_fact_pointers AS fp
                WHERE fp.fact_id = f.id ORDER BY fp.ordinal LIMIT 1),
               f.evidence_kind, fe.ordinal::bigint, fe.message_id, fe.generation_id
        FROM ember.facts AS f
        JOIN ember.fact_evidence AS fe ON fe.fact_id = f.id
        WHERE f.id IN (SELECT cf.fact_id FROM ember.comparison_facts(p_since, p_until) AS cf)
    ),
    resolved AS (
        SELECT ptr.*,
               (m.id IS NOT NULL OR g.id IS NOT NULL) AS found,
               coalesce(m.thread_id, g.thread_id) AS target_thread,
               m.role, m.author, m.tool_status, m.seq, m.content,
               max(m.seq) OVER (PARTITION BY ptr.source, ptr.item_id) AS item_max_seq
        FROM ptr
        LEFT JOIN ember.messages AS m ON m.id = ptr.message_id
        LEFT JOIN ember.generations AS g ON g.id = ptr.generation_id
    )
    SELECT r.source, r.item_id, r.item_thread, r.evidence_kind, r.ordinal, r.message_id, r.generation_id,
           r.found,
           CASE
               WHEN NOT r.found THEN 'target does not exist'
               WHEN r.evidence_kind = 'user-stated' AND (r.message_id IS NULL OR r.role <> 'user'
                                                         OR r.author <> 'human')
                   THEN 'user-stated: not a human user message'
               WHEN r.evidence_kind = 'user-stated' AND ember.is_question(r.content)
                   THEN 'user-stated: the row is only a question'
               WHEN r.evidence_kind = 'tool-verified' AND (r.message_id IS NULL OR r.role <> 'tool_result'
                                                           OR r.tool_status <> 'ok')
                   THEN 'tool-verified: not an ok tool result'
               WHEN r.evidence_kind = 'observed-outcome' AND r.target_thread IS DISTINCT FROM r.item_thread
                   THEN 'observed-outcome: not in the same thread'
               WHEN r.evidence_kind = 'observed-outcome' AND r.message_id IS NOT NULL
                    AND r.seq < r.item_max_seq
                   THEN 'observed-outcome: not the latest row the item cites'
           END
    FROM resolved AS r
    WHERE r.item_thread IS NOT NULL
    ORDER BY r.source, r.item_id, r.ordinal;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_evidence_quality AS
SELECT * FROM ember.comparison_evidence_quality(NULL, NULL);

COMMENT ON VIEW ember.comparison_evidence_quality IS
'Pointer identity checks only, one row per evidence pointer of a valid proposal (source shadow) or a fact
(source steward): the target exists; user-stated points at a human user row (flagged when that row is only a
question); tool-verified at an ok tool result; observed-outcome at a row of the same thread that is the latest
the item cites. problem is NULL when the checks pass. Whether the fact is correct still needs a human read.
Windowed: ember.comparison_evidence_quality(since, until). No isolated thread.';

-- comparison_summary ----------------------------------------------------------------------------

-- A rejection reason without the pointer numbers and thread names, so equal reasons group.
CREATE OR REPLACE FUNCTION ember.rejection_reason_class(p_reason text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT regexp_replace(
        regexp_replace(p_reason, '^pointer \d+ \((message \d+|generation [0-9a-f-]+)\): ', ''),
        '"[^"]*"', '"…"', 'g'
    )
$$;

CREATE OR REPLACE FUNCTION ember.comparison_summary(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    window_since timestamptz,
    window_until timestamptz,
    proposals bigint,
    valid_proposals bigint,
    rejected_proposals bigint,
    rejected_by_reason jsonb,
    facts bigint,
    exact_covered_facts bigint,
    exact_coverage numeric,
    evidence_neighbour_facts bigint,
    evidence_coverage numeric,
    semantic_covered_facts bigint,
    semantic_coverage numeric,
    steward_usd numeric,
    shadow_usd numeric,
    judge_usd numeric,
    steward_p50_ms double precision,
    steward_p95_ms double precision,
    shadow_p50_ms double precision,
    shadow_p95_ms double precision
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    v_facts bigint;
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    SELECT count(DISTINCT f.fact_id) INTO v_facts FROM ember.comparison_facts(p_since, p_until) AS f;
    RETURN QUERY
    WITH prop AS (
        SELECT p.validation_error
        FROM ember.shadow_proposals AS p
        JOIN ember.comparison_open_threads AS o ON o.thread_id = p.thread_id
        WHERE ember.comparison_in_window(p.created_at, p_since, p_until)
    ),
    reasons AS (
        SELECT coalesce(jsonb_object_agg(x.reason, x.n ORDER BY x.reason), '{}'::jsonb) AS by_reason
        FROM (
            SELECT ember.rejection_reason_class(prop.validation_error) AS reason, count(*) AS n
            FROM prop WHERE prop.validation_error IS NOT NULL GROUP BY 1
        ) AS x
    ),
    ex AS (SELECT count(DISTINCT e.fact_id) AS n FROM ember.comparison_exact(p_since, p_until) AS e),
    ev AS (SELECT count(DISTINCT e.fact_id) AS n FROM ember.comparison_evidence(p_since, p_until) AS e),
    se AS (SELECT count(DISTINCT s.fact_id) AS n FROM ember.comparison_semantic(p_since, p_until) AS s),
    cost AS (
        SELECT
            -- NULL as soon as one group of the pipeline is NULL; 0 when it has no runs at all.
            CASE WHEN bool_and(c.estimated_usd IS NOT NULL) FILTER (WHERE c.pipeline = 'steward') IS NOT FALSE
                 THEN coalesce(sum(c.estimated_usd) FILTER (WHERE c.pipeline = 'steward'), 0) END AS steward,
            CASE WHEN bool_and(c.estimated_usd IS NOT NULL) FILTER (WHERE c.pipeline LIKE 'shadow %') IS NOT FALSE
                 THEN coalesce(sum(c.estimated_usd) FILTER (WHERE c.pipeline LIKE 'shadow %'), 0) END AS shadow,
            CASE WHEN bool_and(c.estimated_usd IS NOT NULL) FILTER (WHERE c.pipeline = 'semantic judge') IS NOT FALSE
                 THEN coalesce(sum(c.estimated_usd) FILTER (WHERE c.pipeline = 'semantic judge'), 0) END AS judge
        FROM ember.comparison_cost(p_since, p_until) AS c
    ),
    lat AS (
        SELECT
            percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms) FILTER (WHERE r.pipeline = 'steward') AS s50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms) FILTER (WHERE r.pipeline = 'steward') AS s95,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms)
                FILTER (WHERE r.pipeline LIKE 'shadow %') AS h50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms)
                FILTER (WHERE r.pipeline LIKE 'shadow %') AS h95
        FROM ember.comparison_runs AS r
        WHERE r.latency_ms IS NOT NULL AND ember.comparison_in_window(r.started_at, p_since, p_until)
    )
    SELECT p_since, p_until,
           (SELECT count(*) FROM prop),
           (SELECT count(*) FROM prop WHERE prop.validation_error IS NULL),
           (SELECT count(*) FROM prop WHERE prop.validation_error IS NOT NULL),
           reasons.by_reason,
           v_facts,
           ex.n, round(ex.n::numeric / nullif(v_facts, 0), 4),
           ev.n, round(ev.n::numeric / nullif(v_facts, 0), 4),
           se.n, round(se.n::numeric / nullif(v_facts, 0), 4),
           cost.steward, cost.shadow, cost.judge,
           lat.s50, lat.s95, lat.h50, lat.h95
    FROM reasons, ex, ev, se, cost, lat;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_summary AS
SELECT * FROM ember.comparison_summary(NULL, NULL);

COMMENT ON VIEW ember.comparison_summary IS
'One row per window (this view: all time; ember.comparison_summary(since, until) for a window). Three
coverages of steward facts in separate columns, never mixed: exact (normalized text equal), evidence
(neighbours sharing a pointer, not coverage of meaning) and semantic (judged pairs, reviewable, not truth);
each is facts covered / facts, NULL when the window has no facts. Plus proposals, rejected proposals by
reason, facts, list-price USD by pipeline (NULL when any run lacks a price) and p50/p95 latency. No isolated
thread.';
