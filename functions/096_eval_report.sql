-- `ember eval` (issue 28), the read side: accuracy per pipeline and per category, context size,
-- search latency, cost per correct answer, and the questions where the pipelines disagree. Every
-- figure is computed here so that `ember eval`, its JSON, the HTML report and psql agree on what
-- each column means.
--
-- Cost is never computed from prices outside SQL: extraction is what comparison_cost says the
-- steward's and shadow's runs of the eval's window cost (each run's own list-price snapshot),
-- answering and judging is what each recorded call's snapshot says, both through ember.run_cost_usd.
-- A missing price makes a figure NULL ("unknown"), never a smaller total.
--
-- These functions are SECURITY DEFINER and granted to ember_analyst (like the comparison's), so
-- `ember compare --html` can include a run as the analyst. They show fact and proposal texts and
-- evidence pointers, never a message's content, and nothing of an isolated thread.

-- One call's list-price estimate in USD, by the one function every cost in Ember is computed with.
CREATE OR REPLACE FUNCTION ember.eval_call_usd(c ember.eval_calls)
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ember.run_cost_usd(
        c.input_tokens, c.cache_read_tokens, c.cache_write_5m_tokens, c.cache_write_1h_tokens,
        c.output_tokens, c.price_input, c.price_output, c.price_cache_write_5m,
        c.price_cache_write_1h, c.price_cache_read, c.price_tiers
    )
$$;

-- Sums of USD here are ember.known_sum (062_comparison_runs.sql), as the comparison's are; the
-- name it had here is dropped so that a migrated database holds one definition.
DROP FUNCTION IF EXISTS ember.eval_known_sum(numeric[]);

-- Every run in the database, newest first, with its question counts and whether its answers came
-- from the simulator (then its figures measure the plumbing, not a language model).
CREATE OR REPLACE FUNCTION ember.eval_runs_list()
RETURNS TABLE (
    run_id bigint,
    benchmark text,
    source text,
    source_sha256 text,
    answer_model text,
    judge_model text,
    top_k integer,
    question_limit integer,
    status text,
    error text,
    started_at timestamptz,
    finished_at timestamptz,
    conversations bigint,
    questions bigint,
    excluded bigint,
    calls bigint,
    simulated_calls bigint
)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
    SELECT r.id, r.benchmark, r.source, r.source_sha256, r.answer_model, r.judge_model, r.top_k,
           r.question_limit, r.status, r.error, r.started_at, r.finished_at,
           (SELECT count(*) FROM ember.eval_conversations AS c WHERE c.run_id = r.id),
           (SELECT count(*) FROM ember.eval_questions AS q WHERE q.run_id = r.id),
           (SELECT count(*) FROM ember.eval_questions AS q WHERE q.run_id = r.id AND q.excluded),
           (SELECT count(*) FROM ember.eval_calls AS c WHERE c.run_id = r.id),
           (SELECT count(*) FROM ember.eval_calls AS c WHERE c.run_id = r.id AND c.simulated)
    FROM ember.eval_runs AS r
    ORDER BY r.id DESC
$$;

-- One row per pipeline. questions: asked (not excluded); correct / wrong by the judge; failed:
-- no verdict because a call failed (counted as not correct, so a failing pipeline never looks
-- better for it). accuracy = correct / questions. context_tokens: the memory shown per question
-- (Ember's token estimate), mean and p50. search: search_memory as the client saw it, p50 and p95.
-- extraction_usd: the pipeline's runs in the eval's window (steward; shadow hot and cold) from
-- comparison_cost; answer_usd and judge_usd from the recorded calls. usd_per_correct =
-- (extraction + answering) / correct: what a correct answer cost the system; the judge is the
-- measurement's cost, not the memory's, and is reported apart.
--
-- Its length is its 15 result columns and one query whose CTEs are the figures' sources (the
-- questions asked, the answers, extraction cost, call cost): one pass, no rule of its own.
CREATE OR REPLACE FUNCTION ember.eval_summary(p_run bigint)
RETURNS TABLE (
    pipeline text,
    questions bigint,
    correct bigint,
    wrong bigint,
    failed bigint,
    accuracy double precision,
    context_tokens_mean double precision,
    context_tokens_p50 double precision,
    search_p50_ms double precision,
    search_p95_ms double precision,
    extraction_runs bigint,
    extraction_usd numeric,
    answer_usd numeric,
    judge_usd numeric,
    usd_per_correct numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    r ember.eval_runs := ember.eval_run_row(p_run);
BEGIN
    RETURN QUERY
    WITH pipelines (pipeline) AS (VALUES ('steward'), ('shadow')),
    asked AS (
        SELECT q.question_id FROM ember.eval_questions AS q WHERE q.run_id = p_run AND NOT q.excluded
    ),
    answers AS (
        SELECT a.* FROM ember.eval_answers AS a
        WHERE a.run_id = p_run AND a.question_id IN (SELECT asked.question_id FROM asked)
    ),
    extraction AS (
        SELECT CASE WHEN c.pipeline = 'steward' THEN 'steward' ELSE 'shadow' END AS pipeline,
               sum(c.runs)::bigint AS runs,
               ember.known_sum(array_agg(c.estimated_usd)) AS usd
        FROM ember.comparison_cost(r.started_at, r.finished_at) AS c
        WHERE c.pipeline = 'steward' OR c.pipeline LIKE 'shadow %'
        GROUP BY 1
    ),
    calls AS (
        SELECT c.pipeline,
               ember.known_sum(array_agg(ember.eval_call_usd(c)) FILTER (WHERE c.purpose = 'answer')) AS answer_usd,
               ember.known_sum(array_agg(ember.eval_call_usd(c)) FILTER (WHERE c.purpose = 'judge')) AS judge_usd
        FROM ember.eval_calls AS c
        WHERE c.run_id = p_run
        GROUP BY c.pipeline
    ),
    tallies AS (
        SELECT p.pipeline,
               (SELECT count(*) FROM asked) AS questions,
               count(a.*) FILTER (WHERE a.verdict = 'correct') AS correct,
               count(a.*) FILTER (WHERE a.verdict = 'wrong') AS wrong,
               (SELECT count(*) FROM asked) - count(a.*) FILTER (WHERE a.verdict IS NOT NULL) AS failed,
               avg(a.context_tokens)::double precision AS ctx_mean,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY a.context_tokens) AS ctx_p50,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY a.search_ms) AS s50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY a.search_ms) AS s95
        FROM pipelines AS p
        LEFT JOIN answers AS a ON a.pipeline = p.pipeline
        GROUP BY p.pipeline
    )
    SELECT t.pipeline, t.questions, t.correct, t.wrong, t.failed,
           CASE WHEN t.questions > 0 THEN t.correct::double precision / t.questions END,
           t.ctx_mean, t.ctx_p50, t.s50, t.s95,
           coalesce(x.runs, 0),
           coalesce(x.usd, CASE WHEN x.pipeline IS NULL THEN 0 END),
           coalesce(c.answer_usd, CASE WHEN c.pipeline IS NULL THEN 0 END),
           coalesce(c.judge_usd, CASE WHEN c.pipeline IS NULL THEN 0 END),
           CASE WHEN t.correct > 0 THEN round(
               ember.known_sum(ARRAY[
                   coalesce(x.usd, CASE WHEN x.pipeline IS NULL THEN 0 END),
                   coalesce(c.answer_usd, CASE WHEN c.pipeline IS NULL THEN 0 END)
               ]) / t.correct, 6) END
    FROM tallies AS t
    LEFT JOIN extraction AS x ON x.pipeline = t.pipeline
    LEFT JOIN calls AS c ON c.pipeline = t.pipeline
    ORDER BY t.pipeline DESC;
END;
$$;

-- Accuracy per pipeline and question category (LoCoMo's category number, LongMemEval's question
-- type), with the number of questions asked in each; every category of the run appears, an
-- excluded question in none.
CREATE OR REPLACE FUNCTION ember.eval_categories(p_run bigint)
RETURNS TABLE (
    pipeline text,
    category text,
    questions bigint,
    correct bigint,
    failed bigint,
    accuracy double precision
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.eval_run_row(p_run);
    RETURN QUERY
    SELECT p.pipeline, q.category, count(*),
           count(*) FILTER (WHERE a.verdict = 'correct'),
           count(*) FILTER (WHERE a.verdict IS NULL),
           count(*) FILTER (WHERE a.verdict = 'correct')::double precision / count(*)
    FROM ember.eval_questions AS q
    CROSS JOIN (VALUES ('steward'), ('shadow')) AS p (pipeline)
    LEFT JOIN ember.eval_answers AS a
        ON a.run_id = q.run_id AND a.question_id = q.question_id AND a.pipeline = p.pipeline
    WHERE q.run_id = p_run AND NOT q.excluded
    GROUP BY p.pipeline, q.category
    ORDER BY p.pipeline DESC, q.category;
END;
$$;

-- What one pipeline was shown for one question, as JSON: each item's rank, text, evidence kind,
-- whether the answer model cited it, and its evidence pointers (message or generation id, when it
-- was said, the benchmark's name for it). An item that touches an isolated thread is left out.
CREATE OR REPLACE FUNCTION ember.eval_shown_json(p_run bigint, p_question text, p_pipeline text)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'rank', c.rank,
        'fact_id', c.fact_id,
        'proposal_id', c.proposal_id,
        'text', coalesce(f.text, p.text),
        'evidence_kind', coalesce(f.evidence_kind, p.evidence_kind),
        'cited', c.cited,
        'evidence', CASE WHEN c.fact_id IS NOT NULL THEN ember.eval_pointers(c.fact_id, NULL)
                         ELSE ember.eval_pointers(NULL, p.evidence) END
    ) ORDER BY c.rank), '[]')
    FROM ember.eval_context AS c
    LEFT JOIN ember.facts AS f ON f.id = c.fact_id
    LEFT JOIN ember.shadow_proposals AS p ON p.id = c.proposal_id
    WHERE c.run_id = p_run AND c.question_id = p_question AND c.pipeline = p_pipeline
      AND NOT EXISTS (
          SELECT 1 FROM ember.comparison_fact_pointers AS fp
          WHERE fp.fact_id = c.fact_id
            AND fp.thread_id IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i)
      )
      AND (p.thread_id IS NULL OR p.thread_id NOT IN (SELECT i.thread_id FROM ember.comparison_isolated_threads AS i))
$$;

-- One pipeline's answer as JSON: status, answer, verdict, the judge's reason or the error, and
-- what it was shown.
CREATE OR REPLACE FUNCTION ember.eval_answer_json(p_run bigint, p_question text, p_pipeline text)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'status', coalesce(a.status, 'missing'),
        'answer', a.answer,
        'verdict', a.verdict,
        'reason', a.reason,
        'error', a.error,
        'context_tokens', a.context_tokens,
        'search_ms', a.search_ms,
        'shown', ember.eval_shown_json(p_run, p_question, p_pipeline)
    )
    FROM (SELECT 1) AS one
    LEFT JOIN ember.eval_answers AS a
        ON a.run_id = p_run AND a.question_id = p_question AND a.pipeline = p_pipeline
$$;

-- The questions where the pipelines disagree: one judged correct and the other not (wrong, or no
-- verdict), in question order, with both answers, the judge's reasons and what each was shown.
CREATE OR REPLACE FUNCTION ember.eval_disagreements(p_run bigint)
RETURNS TABLE (
    question_id text,
    conversation text,
    category text,
    question text,
    gold text,
    steward jsonb,
    shadow jsonb
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.eval_run_row(p_run);
    RETURN QUERY
    SELECT q.question_id, q.conversation, q.category, q.question, q.gold,
           ember.eval_answer_json(p_run, q.question_id, 'steward'),
           ember.eval_answer_json(p_run, q.question_id, 'shadow')
    FROM ember.eval_questions AS q
    LEFT JOIN ember.eval_answers AS s
        ON s.run_id = q.run_id AND s.question_id = q.question_id AND s.pipeline = 'steward'
    LEFT JOIN ember.eval_answers AS w
        ON w.run_id = q.run_id AND w.question_id = q.question_id AND w.pipeline = 'shadow'
    WHERE q.run_id = p_run AND NOT q.excluded
      AND (s.verdict = 'correct') IS DISTINCT FROM (w.verdict = 'correct')
      AND (s.verdict = 'correct' OR w.verdict = 'correct')
    ORDER BY q.ordinal;
END;
$$;

-- Every question of a run with both pipelines' verdicts, for the JSON report and for analysis.
CREATE OR REPLACE FUNCTION ember.eval_question_results(p_run bigint)
RETURNS TABLE (
    question_id text,
    conversation text,
    category text,
    excluded boolean,
    question text,
    gold text,
    steward_status text,
    steward_verdict text,
    steward_answer text,
    steward_reason text,
    shadow_status text,
    shadow_verdict text,
    shadow_answer text,
    shadow_reason text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.eval_run_row(p_run);
    RETURN QUERY
    SELECT q.question_id, q.conversation, q.category, q.excluded, q.question, q.gold,
           s.status, s.verdict, s.answer, coalesce(s.reason, s.error),
           w.status, w.verdict, w.answer, coalesce(w.reason, w.error)
    FROM ember.eval_questions AS q
    LEFT JOIN ember.eval_answers AS s
        ON s.run_id = q.run_id AND s.question_id = q.question_id AND s.pipeline = 'steward'
    LEFT JOIN ember.eval_answers AS w
        ON w.run_id = q.run_id AND w.question_id = q.question_id AND w.pipeline = 'shadow'
    WHERE q.run_id = p_run
    ORDER BY q.ordinal;
END;
$$;

-- Granted to ember_analyst in 999_grants.sql, with every other analyst function.
