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

SELECT ember.drop_if_result_changed('ember.comparison_summary(timestamptz, timestamptz)', 'last_at timestamp');

-- Long on purpose: a third of it is the 27 columns of its one row, and the rest is one query whose
-- CTEs each give one group of figures from sets read once (the window's proposals, the matches,
-- the cost, the runs). Split into a function per figure, each would read those sets again, which
-- is what B5 (bench/b5_comparison.py) measures; every rule it counts by lives elsewhere already.
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
    steward_p50_ms bigint,
    steward_p95_ms bigint,
    shadow_p50_ms bigint,
    shadow_p95_ms bigint,
    excluded_facts bigint,
    steward_only_facts bigint,
    shadow_only_proposals bigint,
    semantic_judged_facts bigint,
    judge_runs bigint,
    first_at timestamptz,
    last_at timestamptz
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
DECLARE
    v_facts bigint;
    v_excluded bigint;
    v_first timestamptz;
    v_last timestamptz;
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    -- A fact shadow reads in one thread it cites is not excluded for another it also cites.
    SELECT count(*) FILTER (WHERE x.in_scope), count(*) FILTER (WHERE NOT x.in_scope), min(x.at), max(x.at)
    INTO v_facts, v_excluded, v_first, v_last
    FROM (
        SELECT a.fact_id, bool_or(a.excluded_reason IS NULL) AS in_scope, min(a.created_at) AS at
        FROM ember.comparison_all_facts(p_since, p_until) AS a
        GROUP BY a.fact_id
    ) AS x;
    RETURN QUERY
    WITH prop AS (
        SELECT p.id, p.validation_error, p.created_at
        FROM ember.comparison_window_proposals(p_since, p_until) AS p
    ),
    reasons AS (
        SELECT coalesce(jsonb_object_agg(x.reason, x.n ORDER BY x.reason), '{}'::jsonb) AS by_reason
        FROM (
            SELECT ember.rejection_reason_class(prop.validation_error) AS reason, count(*) AS n
            FROM prop WHERE prop.validation_error IS NOT NULL GROUP BY 1
        ) AS x
    ),
    matches AS MATERIALIZED (SELECT * FROM ember.comparison_matches(p_since, p_until)),
    m AS (
        SELECT count(DISTINCT matches.fact_id) FILTER (WHERE matches.kind = 'exact') AS ex,
               count(DISTINCT matches.fact_id) FILTER (WHERE matches.kind = 'evidence') AS ev,
               count(DISTINCT matches.fact_id) FILTER (WHERE matches.kind = 'semantic') AS se,
               count(DISTINCT matches.fact_id) AS any_fact,
               count(DISTINCT matches.proposal_id) AS any_proposal
        FROM matches
    ),
    judged AS (
        SELECT count(DISTINCT f.fact_id) AS n
        FROM ember.comparison_facts(p_since, p_until) AS f
        WHERE f.fact_id IN (SELECT j.item_id FROM ember.comparison_judged_items() AS j WHERE j.side = 'fact')
    ),
    cost AS (
        SELECT
            -- NULL as soon as one group of the pipeline is NULL; 0 when it has no runs at all.
            ember.known_sum(array_agg(c.estimated_usd) FILTER (WHERE c.pipeline = 'steward')) AS steward,
            ember.known_sum(array_agg(c.estimated_usd) FILTER (WHERE c.pipeline LIKE 'shadow %')) AS shadow,
            ember.known_sum(array_agg(c.estimated_usd) FILTER (WHERE c.pipeline = 'semantic judge')) AS judge,
            coalesce(sum(c.runs) FILTER (WHERE c.pipeline = 'semantic judge'), 0)::bigint AS judge_runs
        FROM ember.comparison_cost(p_since, p_until) AS c
    ),
    runs AS (
        SELECT r.pipeline, r.latency_ms, r.started_at, r.finished_at
        FROM ember.comparison_window_runs(p_since, p_until) AS r
    ),
    lat AS (
        SELECT
            percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms) FILTER (WHERE r.pipeline = 'steward') AS s50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms) FILTER (WHERE r.pipeline = 'steward') AS s95,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms)
                FILTER (WHERE r.pipeline LIKE 'shadow %') AS h50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms)
                FILTER (WHERE r.pipeline LIKE 'shadow %') AS h95
        FROM runs AS r
        WHERE r.finished_at IS NOT NULL AND r.latency_ms IS NOT NULL
    ),
    span AS (
        SELECT min(x.at) AS first_at, max(x.at) AS last_at
        FROM (
            SELECT prop.created_at AS at FROM prop
            UNION ALL
            SELECT unnest(ARRAY[v_first, v_last])
            UNION ALL
            SELECT runs.started_at FROM runs
            UNION ALL
            SELECT runs.finished_at FROM runs
            WHERE runs.finished_at IS NOT NULL AND ember.comparison_in_window(runs.finished_at, p_since, p_until)
        ) AS x
    ),
    counts AS (
        SELECT count(*) AS n, count(*) FILTER (WHERE prop.validation_error IS NULL) AS valid FROM prop
    )
    SELECT p_since, p_until,
           counts.n, counts.valid, counts.n - counts.valid,
           reasons.by_reason,
           v_facts,
           m.ex, round(m.ex::numeric / nullif(v_facts, 0), 4),
           m.ev, round(m.ev::numeric / nullif(v_facts, 0), 4),
           m.se, CASE WHEN judged.n > 0 THEN round(m.se::numeric / nullif(v_facts, 0), 4) END,
           cost.steward, cost.shadow, cost.judge,
           round(lat.s50)::bigint, round(lat.s95)::bigint, round(lat.h50)::bigint, round(lat.h95)::bigint,
           v_excluded, v_facts - m.any_fact, counts.valid - m.any_proposal, judged.n, cost.judge_runs,
           span.first_at, span.last_at
    FROM counts, reasons, m, judged, cost, lat, span;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_summary AS
SELECT * FROM ember.comparison_summary(NULL, NULL);

COMMENT ON VIEW ember.comparison_summary IS
'One row per window (this view: all time; ember.comparison_summary(since, until) for a window). Three
coverages of steward facts in separate columns, never mixed: exact (normalized text equal), evidence
(neighbours sharing a pointer, not coverage of meaning) and semantic (judged pairs, reviewable, not truth);
each is facts covered / facts, NULL when the window has no facts, and semantic_coverage is NULL too while no
fact of the window has been shown to a judge (semantic_judged_facts = 0: not judged, which is not 0). facts
counts only what shadow could have read: a fact none of whose pointers shadow reads (main''s rows, the
steward''s record, history before shadow''s activation) is in excluded_facts instead, listed with its reason
in comparison_excluded_facts. steward_only_facts: facts in no pair of any kind; shadow_only_proposals: valid
proposals in no pair of any kind. Plus proposals, rejected proposals by reason, list-price USD by pipeline
(NULL when any run lacks a price; 0 when the pipeline has no run: judge_runs says whether a judge ran), p50
and p95 latency in whole milliseconds, and first_at / last_at, the earliest and latest proposal, fact or run
time in the window. The rows behind each number: comparison_items, comparison_run_list. No isolated
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
