-- Comparison, continued: cost, latency and evidence quality (helpers in 060_comparison.sql).

-- comparison_cost and comparison_latency --------------------------------------------------------

-- Every run of every pipeline with its usage and price snapshot, in one shape. Shadow runs of an
-- isolated thread are left out like everything else of such a thread. path is hot, cold or
-- steward (the judge's runs: judge); run_id is the id in the pipeline's own table; thread_id is
-- the shadow run's thread (NULL for the steward, which reads many, and the judge).
-- messages_digested: rows a completed run read to the end, the steward's digested_rows and a
-- shadow run's rows above from_seq up to through_seq in its generation, left to
-- comparison_run_list, which counts them only for the runs it lists.
CREATE OR REPLACE VIEW ember.comparison_runs AS
SELECT
    'steward'::text AS pipeline,
    s.model,
    s.status,
    s.started_at,
    s.finished_at,
    s.latency_ms,
    s.input_tokens,
    s.cache_read_tokens,
    s.cache_write_5m_tokens,
    s.cache_write_1h_tokens,
    s.output_tokens,
    s.price_input,
    s.price_output,
    s.price_cache_write_5m,
    s.price_cache_write_1h,
    s.price_cache_read,
    s.price_tiers,
    s.id AS run_id,
    'steward'::text AS path,
    NULL::text AS thread_id,
    s.generation_id,
    NULL::bigint AS from_seq,
    NULL::bigint AS through_seq,
    CASE WHEN s.status = 'completed' THEN s.digested_rows::bigint ELSE 0 END AS digested_rows,
    s.prompt_sha256,
    NULL::numeric AS predicted_hot_usd,
    NULL::numeric AS predicted_cold_usd
FROM ember.steward_runs AS s
UNION ALL
SELECT
    'shadow ' || r.path AS pipeline,
    r.model,
    r.status,
    r.started_at,
    r.finished_at,
    r.latency_ms,
    r.input_tokens,
    r.cache_read_tokens,
    r.cache_write_5m_tokens,
    r.cache_write_1h_tokens,
    r.output_tokens,
    r.price_input,
    r.price_output,
    r.price_cache_write_5m,
    r.price_cache_write_1h,
    r.price_cache_read,
    r.price_tiers,
    r.id AS run_id,
    r.path,
    r.thread_id,
    r.generation_id,
    r.from_seq,
    r.through_seq,
    NULL::bigint AS digested_rows,
    r.prompt_sha256,
    r.predicted_hot_usd,
    r.predicted_cold_usd
FROM ember.shadow_runs AS r
WHERE r.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
UNION ALL
SELECT
    'semantic judge' AS pipeline,
    j.model,
    j.status,
    j.started_at,
    j.finished_at,
    j.latency_ms,
    j.input_tokens,
    j.cache_read_tokens,
    j.cache_write_5m_tokens,
    j.cache_write_1h_tokens,
    j.output_tokens,
    j.price_input,
    j.price_output,
    j.price_cache_write_5m,
    j.price_cache_write_1h,
    j.price_cache_read,
    j.price_tiers,
    j.id AS run_id,
    'judge'::text AS path,
    NULL::text AS thread_id,
    NULL::uuid AS generation_id,
    NULL::bigint AS from_seq,
    NULL::bigint AS through_seq,
    0::bigint AS digested_rows,
    j.prompt_sha256,
    NULL::numeric AS predicted_hot_usd,
    NULL::numeric AS predicted_cold_usd
FROM ember.judge_runs AS j;

-- The runs of a window, by their start: the one rule every cost, latency and run list of the
-- comparison (and the summary's first_at and last_at) windows runs by.
CREATE OR REPLACE FUNCTION ember.comparison_window_runs(p_since timestamptz, p_until timestamptz)
RETURNS SETOF ember.comparison_runs
LANGUAGE sql STABLE
AS $$
    SELECT r.* FROM ember.comparison_runs AS r
    WHERE ember.comparison_in_window(r.started_at, p_since, p_until)
$$;

-- A sum of USD that is unknown (NULL) as soon as one of its parts is, never a smaller total, and 0
-- of no parts at all: the rule of every USD total by pipeline (comparison_summary) and of an eval's
-- costs (096_eval_report.sql).
CREATE OR REPLACE FUNCTION ember.known_sum(p_parts numeric[])
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN bool_and(x IS NOT NULL) IS NOT FALSE THEN coalesce(sum(x), 0) END
    FROM unnest(p_parts) AS x
$$;

-- What a run cost at list price: every USD figure of the comparison (cost by pipeline, by
-- path, by thread, per run, per fact) is a sum of run_usd and run_output_usd, and both price
-- through ember.run_cost_usd (048_shadow_cost.sql), so a change of how a token kind is priced
-- is a change there only. A run's list-price estimate in USD (ember.run_cost_usd), or NULL when any price of its snapshot is
-- missing.
CREATE OR REPLACE FUNCTION ember.run_usd(r ember.comparison_runs)
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ember.run_cost_usd(
        r.input_tokens, r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens,
        r.output_tokens, r.price_input, r.price_output, r.price_cache_write_5m,
        r.price_cache_write_1h, r.price_cache_read, r.price_tiers
    )
$$;

-- The output tokens' part of run_usd (seed 000 section 9: on the hot path the input is mostly
-- cache reads, and output is paid at the thread's own model's price: "the column to watch"): the
-- run's cost less what it would cost without its output, so a price tier chosen by the input's
-- size prices the output too, exactly as run_cost_usd does.
CREATE OR REPLACE FUNCTION ember.run_output_usd(r ember.comparison_runs)
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ember.run_usd(r) - ember.run_cost_usd(
        r.input_tokens, r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens,
        0, r.price_input, r.price_output, r.price_cache_write_5m,
        r.price_cache_write_1h, r.price_cache_read, r.price_tiers
    )
$$;

SELECT ember.drop_if_result_changed('ember.comparison_cost(timestamptz, timestamptz)', 'predicted_input_usd numeric');

CREATE OR REPLACE FUNCTION ember.comparison_cost(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    pipeline text,
    model text,
    status text,
    runs bigint,
    input_tokens bigint,
    cache_read_tokens bigint,
    cache_write_5m_tokens bigint,
    cache_write_1h_tokens bigint,
    output_tokens bigint,
    runs_without_price bigint,
    estimated_usd numeric,
    input_usd numeric,
    predicted_input_usd numeric,
    predicted_other_path_usd numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT r.pipeline, r.model, r.status, count(*),
           sum(r.input_tokens)::bigint, sum(r.cache_read_tokens)::bigint, sum(r.cache_write_5m_tokens)::bigint,
           sum(r.cache_write_1h_tokens)::bigint, sum(r.output_tokens)::bigint,
           count(*) FILTER (WHERE ember.run_usd(r) IS NULL),
           -- A missing price makes the whole group unknown: never a smaller total.
           CASE WHEN bool_and(ember.run_usd(r) IS NOT NULL) THEN round(sum(ember.run_usd(r)), 6) END,
           -- The input part of what the runs cost, beside what the claims predicted for it (shadow
           -- runs: the path taken, and the path not taken). Unknown as soon as one part is.
           round(ember.known_sum(array_agg(ember.run_usd(r) - ember.run_output_usd(r))), 6),
           CASE WHEN r.pipeline LIKE 'shadow %' THEN round(ember.known_sum(array_agg(
               CASE r.path WHEN 'hot' THEN r.predicted_hot_usd ELSE r.predicted_cold_usd END)), 6) END,
           CASE WHEN r.pipeline LIKE 'shadow %' THEN round(ember.known_sum(array_agg(
               CASE r.path WHEN 'hot' THEN r.predicted_cold_usd ELSE r.predicted_hot_usd END)), 6) END
    FROM ember.comparison_window_runs(p_since, p_until) AS r
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
total. Windowed by run start: ember.comparison_cost(since, until). No run of an isolated thread. The runs
themselves: comparison_run_list.';

SELECT ember.drop_if_result_changed('ember.comparison_latency(timestamptz, timestamptz)', 'p50_ms bigint');

-- Percentiles are rounded to whole milliseconds: a latency measured in milliseconds has no
-- meaningful fraction, and 152.34999999999997 reads as noise in psql and in JSON alike.
CREATE OR REPLACE FUNCTION ember.comparison_latency(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    pipeline text,
    model text,
    runs bigint,
    p50_ms bigint,
    p95_ms bigint,
    max_ms bigint
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT r.pipeline, r.model, count(*),
           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_ms))::bigint,
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_ms))::bigint,
           max(r.latency_ms)
    FROM ember.comparison_window_runs(p_since, p_until) AS r
    WHERE r.finished_at IS NOT NULL AND r.latency_ms IS NOT NULL
    GROUP BY r.pipeline, r.model
    ORDER BY r.pipeline, r.model;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_latency AS
SELECT * FROM ember.comparison_latency(NULL, NULL);

COMMENT ON VIEW ember.comparison_latency IS
'Latency of finished runs by pipeline and model: p50 and p95 (continuous percentiles, rounded to whole
milliseconds) and max, in milliseconds. Windowed by run start: ember.comparison_latency(since, until).';

-- comparison_run_list ---------------------------------------------------------------------------

-- The runs behind every cost and latency figure, one row each, with the digest of the prompt text
-- each was sent with (NULL before migration 0046), so runs can be grouped by prompt version.
SELECT ember.drop_if_result_changed('ember.comparison_run_list(timestamptz, timestamptz)', 'prompt_sha256 text');
SELECT ember.drop_if_result_changed(
    'ember.comparison_run_list(timestamptz, timestamptz)', 'predicted_other_path_usd numeric'
);

CREATE OR REPLACE FUNCTION ember.comparison_run_list(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    pipeline text,
    path text,
    run_id bigint,
    thread_id text,
    model text,
    status text,
    started_at timestamptz,
    finished_at timestamptz,
    latency_ms bigint,
    input_tokens bigint,
    cache_read_tokens bigint,
    cache_write_5m_tokens bigint,
    cache_write_1h_tokens bigint,
    output_tokens bigint,
    messages_digested bigint,
    facts_written bigint,
    proposals_written bigint,
    valid_proposals_written bigint,
    estimated_usd numeric,
    output_usd numeric,
    prompt_sha256 text,
    predicted_input_usd numeric,
    predicted_other_path_usd numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH runs AS MATERIALIZED (
        SELECT r.*, ember.run_usd(r) AS usd, ember.run_output_usd(r) AS out_usd
        FROM ember.comparison_window_runs(p_since, p_until) AS r
    ),
    facts_by_run AS (
        SELECT f.run_id, count(*) AS n FROM ember.facts AS f
        WHERE f.run_id IN (SELECT runs.run_id FROM runs WHERE runs.path = 'steward')
        GROUP BY f.run_id
    ),
    proposals_by_run AS (
        SELECT p.run_id, count(*) AS n, count(*) FILTER (WHERE p.validation_error IS NULL) AS valid
        FROM ember.shadow_proposals AS p
        WHERE p.run_id IN (SELECT runs.run_id FROM runs WHERE runs.path IN ('hot', 'cold'))
        GROUP BY p.run_id
    )
    SELECT r.pipeline, r.path, r.run_id, r.thread_id, r.model, r.status, r.started_at, r.finished_at,
           r.latency_ms, r.input_tokens, r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens,
           r.output_tokens,
           CASE
               WHEN r.path NOT IN ('hot', 'cold') THEN r.digested_rows
               WHEN r.status <> 'completed' THEN 0::bigint
               ELSE (SELECT count(*) FROM ember.messages AS m
                     WHERE m.generation_id = r.generation_id AND m.seq > r.from_seq AND m.seq <= r.through_seq)
           END,
           CASE WHEN r.path = 'steward' THEN coalesce(fr.n, 0) END,
           CASE WHEN r.path IN ('hot', 'cold') THEN coalesce(pr.n, 0) END,
           CASE WHEN r.path IN ('hot', 'cold') THEN coalesce(pr.valid, 0) END,
           round(r.usd, 6), round(r.out_usd, 6), r.prompt_sha256,
           -- What the shadow claim predicted the input would cost on the path it took, and on
           -- the other one (048_shadow_cost.sql); NULL for the steward and the judge.
           round(CASE r.path WHEN 'hot' THEN r.predicted_hot_usd WHEN 'cold' THEN r.predicted_cold_usd END, 6),
           round(CASE r.path WHEN 'hot' THEN r.predicted_cold_usd WHEN 'cold' THEN r.predicted_hot_usd END, 6)
    FROM runs AS r
    LEFT JOIN facts_by_run AS fr ON r.path = 'steward' AND fr.run_id = r.run_id
    LEFT JOIN proposals_by_run AS pr ON r.path IN ('hot', 'cold') AND pr.run_id = r.run_id
    ORDER BY r.started_at, r.pipeline, r.run_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_run_list AS
SELECT * FROM ember.comparison_run_list(NULL, NULL);

COMMENT ON VIEW ember.comparison_run_list IS
'One row per run of every pipeline (the rows behind comparison_cost, comparison_latency and the USD and
latency columns of comparison_summary and comparison_by_path): pipeline (steward, shadow hot, shadow cold,
semantic judge), path (steward, hot, cold, judge), the run id in its own table, the shadow run''s thread
(NULL for the steward and the judge), model, status, start, finish, latency_ms, tokens by kind;
messages_digested, the rows a completed run read to the end (the steward''s digested rows; a shadow run''s
rows from_seq < seq <= through_seq of its generation; 0 for a run that did not complete); facts_written
(steward), proposals_written and valid_proposals_written (shadow); estimated_usd (NULL when the run lacks a
price) and output_usd, its output tokens'' part, from the run''s list-price snapshot; prompt_sha256, the hex
sha256 of the prompt text the run was sent with (NULL for runs recorded without one); predicted_input_usd and
predicted_other_path_usd, what a shadow run''s claim predicted its input would cost on the path it took and on
the other path (NULL for the steward, the judge and runs claimed before predictions). Windowed by run start:
ember.comparison_run_list(since, until). No run of an isolated thread.';

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
        WHERE f.id IN (SELECT cf.fact_id FROM ember.comparison_all_facts(p_since, p_until) AS cf)
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
