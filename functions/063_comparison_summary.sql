-- Comparison, continued: the one-row summary over every other comparison.

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
SET work_mem = '64MB'
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
        WHERE p.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
          AND ember.comparison_in_window(p.created_at, p_since, p_until)
    ),
    reasons AS (
        SELECT coalesce(jsonb_object_agg(x.reason, x.n ORDER BY x.reason), '{}'::jsonb) AS by_reason
        FROM (
            SELECT ember.rejection_reason_class(prop.validation_error) AS reason, count(*) AS n
            FROM prop WHERE prop.validation_error IS NOT NULL GROUP BY 1
        ) AS x
    ),
    ex AS (SELECT count(DISTINCT e.fact_id) AS n FROM ember.comparison_exact_pairs(p_since, p_until) AS e),
    ev AS (SELECT count(DISTINCT e.fact_id) AS n FROM ember.comparison_evidence_pairs(p_since, p_until) AS e),
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
        WHERE r.finished_at IS NOT NULL AND r.latency_ms IS NOT NULL
          AND ember.comparison_in_window(r.started_at, p_since, p_until)
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

-- The summary day by day (UTC days), for the report's coverage-over-time chart: every day from
-- the first to the last proposal or fact of the window, at most 366 days back from the last.
CREATE OR REPLACE FUNCTION ember.comparison_daily(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    day date,
    proposals bigint,
    facts bigint,
    exact_coverage numeric,
    evidence_coverage numeric,
    semantic_coverage numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
DECLARE
    v_first date;
    v_last date;
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    SELECT min(x.at AT TIME ZONE 'UTC')::date, max(x.at AT TIME ZONE 'UTC')::date INTO v_first, v_last
    FROM (
        SELECT p.created_at AS at FROM ember.comparison_proposals(p_since, p_until) AS p
        UNION ALL
        SELECT f.created_at FROM ember.comparison_facts(p_since, p_until) AS f
    ) AS x;
    IF v_first IS NULL THEN
        RETURN;
    END IF;
    v_first := greatest(v_first, v_last - 366);
    RETURN QUERY
    SELECT d.day::date, s.proposals, s.facts, s.exact_coverage, s.evidence_coverage, s.semantic_coverage
    FROM generate_series(v_first::timestamp, v_last::timestamp, interval '1 day') AS d (day)
    CROSS JOIN LATERAL ember.comparison_summary(
        greatest((d.day AT TIME ZONE 'UTC'), p_since),
        CASE WHEN p_until IS NULL THEN (d.day + interval '1 day') AT TIME ZONE 'UTC'
             ELSE least((d.day + interval '1 day') AT TIME ZONE 'UTC', p_until) END
    ) AS s
    ORDER BY d.day;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_daily AS
SELECT * FROM ember.comparison_daily(NULL, NULL);

COMMENT ON VIEW ember.comparison_daily IS
'comparison_summary per UTC day (proposals, facts and the three coverages, still separate), from the first to
the last day with a proposal or fact. Windowed: ember.comparison_daily(since, until).';

-- The summary's counts per thread, for finding where the pipelines disagree.
CREATE OR REPLACE FUNCTION ember.comparison_by_thread(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    thread_id text,
    proposals bigint,
    rejected_proposals bigint,
    facts bigint,
    exact_covered_facts bigint,
    evidence_neighbour_facts bigint,
    semantic_covered_facts bigint
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH prop AS (
        SELECT p.thread_id, count(*) AS n, count(*) FILTER (WHERE p.validation_error IS NOT NULL) AS rejected
        FROM ember.shadow_proposals AS p
        WHERE p.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
          AND ember.comparison_in_window(p.created_at, p_since, p_until)
        GROUP BY p.thread_id
    ),
    fct AS (
        SELECT f.thread_id, count(DISTINCT f.fact_id) AS n
        FROM ember.comparison_facts(p_since, p_until) AS f GROUP BY f.thread_id
    ),
    ex AS (
        SELECT e.thread_id, count(DISTINCT e.fact_id) AS n
        FROM ember.comparison_exact_pairs(p_since, p_until) AS e GROUP BY e.thread_id
    ),
    ev AS (
        SELECT e.thread_id, count(DISTINCT e.fact_id) AS n
        FROM ember.comparison_evidence_pairs(p_since, p_until) AS e GROUP BY e.thread_id
    ),
    se AS (
        SELECT s.thread_id, count(DISTINCT s.fact_id) AS n
        FROM ember.comparison_semantic(p_since, p_until) AS s GROUP BY s.thread_id
    )
    SELECT t.thread_id, coalesce(prop.n, 0), coalesce(prop.rejected, 0), coalesce(fct.n, 0),
           coalesce(ex.n, 0), coalesce(ev.n, 0), coalesce(se.n, 0)
    FROM (SELECT prop.thread_id FROM prop UNION SELECT fct.thread_id FROM fct) AS t
    LEFT JOIN prop ON prop.thread_id = t.thread_id
    LEFT JOIN fct ON fct.thread_id = t.thread_id
    LEFT JOIN ex ON ex.thread_id = t.thread_id
    LEFT JOIN ev ON ev.thread_id = t.thread_id
    LEFT JOIN se ON se.thread_id = t.thread_id
    ORDER BY t.thread_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_by_thread AS
SELECT * FROM ember.comparison_by_thread(NULL, NULL);

COMMENT ON VIEW ember.comparison_by_thread IS
'comparison_summary''s counts per thread: proposals (rejected ones too), facts, and facts covered exactly, by an
evidence neighbour and by a judged pair, in separate columns. Windowed: ember.comparison_by_thread(since,
until). No isolated thread.';
