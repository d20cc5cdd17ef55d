-- Comparison, continued: the summary split by path and by thread, counted from the item rows of
-- 064_comparison_items.sql, so every count here is rows an analyst can list there.
--
-- Hot against cold, side by side with the steward (issue 24; seed 000 sections 3 and 9): the
-- question the comparison exists to answer is what each path buys. The hot path reads a warm
-- prefix with the thread's own model and pays output at that model's price, the cold path reads
-- rendered pages with a light model. So every measure is split by path.

-- Long on purpose: 31 result columns, and one query over the item rows and the run list, each
-- read once and grouped by path; the CTEs are the three groupings (facts, proposals, runs) and the
-- final SELECT only divides them. Split per measure, each part would read both sets again.
CREATE OR REPLACE FUNCTION ember.comparison_by_path(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    path text,
    runs bigint,
    completed_runs bigint,
    failed_runs bigint,
    cancelled_runs bigint,
    proposals bigint,
    valid_proposals bigint,
    rejected_proposals bigint,
    validity_rate numeric,
    facts bigint,
    exact_covered_facts bigint,
    exact_coverage numeric,
    evidence_neighbour_facts bigint,
    evidence_coverage numeric,
    semantic_covered_facts bigint,
    semantic_coverage numeric,
    semantic_judged_facts bigint,
    input_tokens bigint,
    cache_read_tokens bigint,
    cache_write_tokens bigint,
    output_tokens bigint,
    runs_without_price bigint,
    estimated_usd numeric,
    output_usd numeric,
    output_share numeric,
    messages_digested bigint,
    usd_per_fact numeric,
    usd_per_1000_messages numeric,
    p50_ms bigint,
    p95_ms bigint,
    max_ms bigint
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH paths (path, pos) AS (VALUES ('hot'::text, 1), ('cold', 2), ('steward', 3)),
    items AS MATERIALIZED (SELECT * FROM ember.comparison_item_rows(p_since, p_until)),
    runs AS MATERIALIZED (
        SELECT * FROM ember.comparison_run_list(p_since, p_until) AS r WHERE r.path IN ('hot', 'cold', 'steward')
    ),
    -- The facts each shadow path is measured against: in scope, with rows that path has read.
    -- The steward's own row counts every fact of the window it wrote, main's included.
    path_facts AS (
        SELECT u.path, i.item_id, i.exact_ids <> '{}' AS ex, i.evidence_ids <> '{}' AS ev,
               i.semantic_ids <> '{}' AS se, i.judged
        FROM items AS i
        CROSS JOIN LATERAL unnest(i.read_by_shadow) AS u (path)
        WHERE i.item = 'fact' AND i.excluded_reason IS NULL
        UNION ALL
        SELECT 'steward', i.item_id, NULL, NULL, NULL, NULL
        FROM items AS i WHERE i.item = 'fact'
    ),
    fact_counts AS (
        SELECT pf.path, count(DISTINCT pf.item_id) AS n,
               count(DISTINCT pf.item_id) FILTER (WHERE pf.ex) AS ex,
               count(DISTINCT pf.item_id) FILTER (WHERE pf.ev) AS ev,
               count(DISTINCT pf.item_id) FILTER (WHERE pf.se) AS se,
               count(DISTINCT pf.item_id) FILTER (WHERE pf.judged) AS judged
        FROM path_facts AS pf GROUP BY pf.path
    ),
    proposal_counts AS (
        SELECT i.path, count(*) AS n, count(*) FILTER (WHERE NOT i.rejected) AS valid
        FROM items AS i WHERE i.item = 'proposal' GROUP BY i.path
    ),
    run_counts AS (
        SELECT r.path, count(*) AS n,
               count(*) FILTER (WHERE r.status = 'completed') AS completed,
               count(*) FILTER (WHERE r.status = 'failed') AS failed,
               count(*) FILTER (WHERE r.status = 'cancelled') AS cancelled,
               sum(r.input_tokens)::bigint AS input_tokens,
               sum(r.cache_read_tokens)::bigint AS cache_read_tokens,
               sum(r.cache_write_5m_tokens + r.cache_write_1h_tokens)::bigint AS cache_write_tokens,
               sum(r.output_tokens)::bigint AS output_tokens,
               count(*) FILTER (WHERE r.estimated_usd IS NULL) AS unpriced,
               -- A missing price makes the path's USD unknown, never a smaller total.
               CASE WHEN bool_and(r.estimated_usd IS NOT NULL) THEN sum(r.estimated_usd) END AS usd,
               CASE WHEN bool_and(r.estimated_usd IS NOT NULL) THEN sum(r.output_usd) END AS out_usd,
               sum(r.messages_digested)::bigint AS digested,
               round(percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms)
                     FILTER (WHERE r.finished_at IS NOT NULL))::bigint AS p50,
               round(percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms)
                     FILTER (WHERE r.finished_at IS NOT NULL))::bigint AS p95,
               max(r.latency_ms) FILTER (WHERE r.finished_at IS NOT NULL) AS mx
        FROM runs AS r GROUP BY r.path
    )
    SELECT p.path,
           coalesce(rc.n, 0), coalesce(rc.completed, 0), coalesce(rc.failed, 0), coalesce(rc.cancelled, 0),
           CASE WHEN p.path <> 'steward' THEN coalesce(pc.n, 0) END,
           CASE WHEN p.path <> 'steward' THEN coalesce(pc.valid, 0) END,
           CASE WHEN p.path <> 'steward' THEN coalesce(pc.n - pc.valid, 0) END,
           round(pc.valid::numeric / nullif(pc.n, 0), 4),
           coalesce(fc.n, 0),
           CASE WHEN p.path <> 'steward' THEN coalesce(fc.ex, 0) END,
           CASE WHEN p.path <> 'steward' THEN round(fc.ex::numeric / nullif(fc.n, 0), 4) END,
           CASE WHEN p.path <> 'steward' THEN coalesce(fc.ev, 0) END,
           CASE WHEN p.path <> 'steward' THEN round(fc.ev::numeric / nullif(fc.n, 0), 4) END,
           CASE WHEN p.path <> 'steward' THEN coalesce(fc.se, 0) END,
           CASE WHEN p.path <> 'steward' AND fc.judged > 0 THEN round(fc.se::numeric / nullif(fc.n, 0), 4) END,
           CASE WHEN p.path <> 'steward' THEN coalesce(fc.judged, 0) END,
           coalesce(rc.input_tokens, 0), coalesce(rc.cache_read_tokens, 0), coalesce(rc.cache_write_tokens, 0),
           coalesce(rc.output_tokens, 0), coalesce(rc.unpriced, 0),
           CASE WHEN rc.n IS NULL THEN 0 ELSE round(rc.usd, 6) END,
           CASE WHEN rc.n IS NULL THEN 0 ELSE round(rc.out_usd, 6) END,
           round(rc.out_usd / nullif(rc.usd, 0), 4),
           coalesce(rc.digested, 0),
           round(rc.usd / nullif(CASE WHEN p.path = 'steward' THEN fc.n ELSE pc.valid END, 0), 6),
           round(rc.usd * 1000 / nullif(rc.digested, 0), 6),
           rc.p50, rc.p95, rc.mx
    FROM paths AS p
    LEFT JOIN run_counts AS rc ON rc.path = p.path
    LEFT JOIN proposal_counts AS pc ON pc.path = p.path
    LEFT JOIN fact_counts AS fc ON fc.path = p.path
    ORDER BY p.pos;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_by_path AS
SELECT * FROM ember.comparison_by_path(NULL, NULL);

COMMENT ON VIEW ember.comparison_by_path IS
'Hot against cold, beside the steward: one row per path (hot, cold, steward). runs by status (a steward run is
never cancelled). proposals, valid_proposals, rejected_proposals and validity_rate (valid / proposals) for the
shadow paths, NULL for the steward. facts: for hot and cold, the facts shadow could read whose rows in their
thread a completed run of that path has read (so each path''s coverage is of the facts it had the rows for;
a fact not read yet by either counts in comparison_summary.facts only); for the steward, every fact of the
window. exact, evidence and semantic coverage of those facts by any proposal, kept apart as in
comparison_summary (semantic_coverage NULL while none was judged: not judged). Tokens (cache_write_tokens:
5-minute and 1-hour writes together), runs_without_price, estimated_usd (list-price snapshot, not
subscription billing; NULL when any run lacks a price), output_usd and output_share (output_usd /
estimated_usd: seed 000 section 9''s column to watch, since the hot path pays output at the thread''s own
model''s price), messages_digested (rows completed runs read to the end), usd_per_fact (per fact the
steward wrote, per valid proposal for a shadow path), usd_per_1000_messages (all runs'' USD per 1,000
digested rows), and p50, p95 (rounded) and max latency in milliseconds of finished runs. Windowed by
creation and run start: ember.comparison_by_path(since, until). The rows: comparison_items (path) and
comparison_run_list. No isolated thread.';

-- The summary's counts per thread, for finding where the pipelines disagree.
SELECT ember.drop_if_result_changed('ember.comparison_by_thread(timestamptz, timestamptz)', 'shadow_usd numeric');

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
    semantic_covered_facts bigint,
    excluded_facts bigint,
    steward_only_facts bigint,
    shadow_only_proposals bigint,
    hot_proposals bigint,
    cold_proposals bigint,
    semantic_judged_facts bigint,
    shadow_runs bigint,
    shadow_usd numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    -- Counted from comparison_item_rows, the rows comparison_items shows, so each count is the
    -- rows an analyst gets with WHERE thread_id = ... there.
    WITH items AS MATERIALIZED (
        SELECT * FROM ember.comparison_item_rows(p_since, p_until)
    ),
    counts AS (
        SELECT i.thread_id,
               count(*) FILTER (WHERE i.item = 'proposal') AS proposals,
               count(*) FILTER (WHERE i.item = 'proposal' AND i.rejected) AS rejected,
               count(*) FILTER (WHERE i.item = 'proposal' AND i.path = 'hot') AS hot,
               count(*) FILTER (WHERE i.item = 'proposal' AND i.path = 'cold') AS cold,
               count(*) FILTER (WHERE i.item = 'fact' AND i.excluded_reason IS NULL) AS facts,
               count(*) FILTER (WHERE i.item = 'fact' AND i.excluded_reason IS NOT NULL) AS excluded,
               count(*) FILTER (WHERE i.item = 'fact' AND i.exact_ids <> '{}') AS ex,
               count(*) FILTER (WHERE i.item = 'fact' AND i.evidence_ids <> '{}') AS ev,
               count(*) FILTER (WHERE i.item = 'fact' AND i.semantic_ids <> '{}') AS se,
               count(*) FILTER (
                   WHERE i.item = 'fact' AND i.excluded_reason IS NULL
                     AND i.exact_ids = '{}' AND i.evidence_ids = '{}' AND i.semantic_ids = '{}'
               ) AS steward_only,
               count(*) FILTER (
                   WHERE i.item = 'proposal' AND NOT i.rejected
                     AND i.exact_ids = '{}' AND i.evidence_ids = '{}' AND i.semantic_ids = '{}'
               ) AS shadow_only,
               count(*) FILTER (WHERE i.item = 'fact' AND i.excluded_reason IS NULL AND i.judged) AS judged
        FROM items AS i
        GROUP BY i.thread_id
    ),
    runs AS (
        SELECT r.thread_id, count(*) AS n,
               CASE WHEN bool_and(ember.run_usd(r) IS NOT NULL) THEN round(sum(ember.run_usd(r)), 6) END AS usd
        FROM ember.comparison_window_runs(p_since, p_until) AS r
        WHERE r.path IN ('hot', 'cold')
        GROUP BY r.thread_id
    )
    SELECT c.thread_id, c.proposals, c.rejected, c.facts, c.ex, c.ev, c.se, c.excluded,
           c.steward_only, c.shadow_only, c.hot, c.cold, c.judged,
           coalesce(runs.n, 0), CASE WHEN runs.n IS NULL THEN 0 ELSE runs.usd END
    FROM counts AS c
    LEFT JOIN runs ON runs.thread_id = c.thread_id
    ORDER BY c.thread_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_by_thread AS
SELECT * FROM ember.comparison_by_thread(NULL, NULL);

COMMENT ON VIEW ember.comparison_by_thread IS
'comparison_summary''s counts per thread: proposals (rejected ones too; hot_proposals and cold_proposals by
path), facts shadow could have read and the facts covered exactly, by an evidence neighbour and by a judged
pair, in separate columns; a fact is counted in every thread it cites. excluded_facts: facts citing the
thread whose rows there shadow never reads (all of main''s, for one). steward_only_facts and
shadow_only_proposals: in no pair of any kind. semantic_judged_facts: facts a judge was shown. shadow_runs
and shadow_usd: the thread''s shadow runs and their list-price USD (NULL when one lacks a price). The rows
behind each count: comparison_items WHERE thread_id = .... Windowed: ember.comparison_by_thread(since,
until). No isolated thread.';

-- The report's frame: which database, when it was asked, the window as asked. The window in
-- absolute time is comparison_summary's first_at and last_at.
CREATE OR REPLACE FUNCTION ember.comparison_context(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    database_name text,
    generated_at timestamptz,
    window_since timestamptz,
    window_until timestamptz,
    shadow_activated_at timestamptz,
    analyst_row_chars integer
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT current_database()::text, clock_timestamp(), p_since, p_until,
           (SELECT a.activated_at FROM ember.shadow_activation AS a),
           ember.setting_int('analyst_row_chars');
END;
$$;

COMMENT ON FUNCTION ember.comparison_context(timestamptz, timestamptz) IS
'The frame of a comparison report: the database''s name, the time it was asked (clock_timestamp), the window
as asked (NULL: open; comparison_summary''s first_at and last_at give it in absolute time), when shadow was
activated, and the characters an evidence excerpt keeps (setting analyst_row_chars).';
