-- `ember eval` (issue 28), continued from 093_eval.sql: what the answer model is shown, every answer
-- and judge call with its price snapshot, each pipeline's answer, the end of a run, and the
-- estimate before one.

-- One evidence pointer as a report names it: the message or generation, when it was said, and the
-- benchmark's own name for it (a dia_id, a session id).
CREATE OR REPLACE FUNCTION ember.eval_pointers(p_fact bigint, p_evidence jsonb)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'message_id', x.message_id,
        'generation_id', x.generation_id,
        'at', coalesce(m.created_at, g.started_at),
        'source', coalesce(t.source_id, s.source_id)
    ) ORDER BY x.ordinal), '[]')
    FROM (
        SELECT fe.ordinal::bigint AS ordinal, fe.message_id, fe.generation_id
        FROM ember.fact_evidence AS fe WHERE p_fact IS NOT NULL AND fe.fact_id = p_fact
        UNION ALL
        SELECT e.ordinality, (e.value ->> 'message_id')::bigint, (e.value ->> 'generation_id')::uuid
        FROM jsonb_array_elements(CASE WHEN p_fact IS NULL THEN p_evidence ELSE '[]' END)
            WITH ORDINALITY AS e (value, ordinality)
    ) AS x
    LEFT JOIN ember.messages AS m ON m.id = x.message_id
    LEFT JOIN ember.generations AS g ON g.id = x.generation_id
    LEFT JOIN ember.eval_turns AS t ON t.message_id = x.message_id
    LEFT JOIN ember.eval_sessions AS s ON s.generation_id = x.generation_id
$$;

-- The facts a search returned, in its order, as the answer model is shown them: text, evidence
-- kind, when the evidence was said (the latest pointer: when the fact became known), and the
-- pointers. For shadow each fact is named by the proposal it stands for (eval_promotions), since
-- the fact itself is rolled back with the cut-over. An id that is not memory of that pipeline is
-- refused (EM112), so nothing but what search_memory returned can be shown as memory.
CREATE OR REPLACE FUNCTION ember.eval_shown(p_run bigint, p_pipeline text, p_fact_ids bigint[])
RETURNS TABLE (
    rank integer,
    fact_id bigint,
    proposal_id bigint,
    text text,
    evidence_kind text,
    stated_at timestamptz,
    evidence jsonb
)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_bad bigint;
BEGIN
    PERFORM ember.eval_running(p_run);
    IF p_pipeline IS NULL OR p_pipeline NOT IN ('steward', 'shadow') THEN
        PERFORM ember.eval_bad_record('eval_shown', format('unknown pipeline %s', coalesce(to_json(p_pipeline)::text, 'NULL')));
    END IF;
    SELECT i INTO v_bad FROM unnest(coalesce(p_fact_ids, '{}')) AS i
    WHERE NOT EXISTS (SELECT 1 FROM ember.facts AS f WHERE f.id = i AND f.status = 'active')
       OR (p_pipeline = 'shadow') <> EXISTS (
           SELECT 1 FROM ember.eval_promotions AS e WHERE e.fact_id = i AND e.run_id = p_run
       )
    LIMIT 1;
    IF FOUND THEN
        PERFORM ember.eval_bad_record('eval_shown', format('fact %s is not active memory of %s', v_bad, p_pipeline));
    END IF;
    RETURN QUERY
    SELECT x.ordinality::integer,
           CASE WHEN p_pipeline = 'steward' THEN f.id END,
           e.proposal_id,
           f.text,
           f.evidence_kind,
           (SELECT max((p.value ->> 'at')::timestamptz) FROM jsonb_array_elements(ev.pointers) AS p),
           ev.pointers
    FROM unnest(coalesce(p_fact_ids, '{}')) WITH ORDINALITY AS x (id, ordinality)
    INNER JOIN ember.facts AS f ON f.id = x.id
    LEFT JOIN ember.eval_promotions AS e ON e.fact_id = f.id
    CROSS JOIN LATERAL (SELECT ember.eval_pointers(f.id, NULL) AS pointers) AS ev
    ORDER BY x.ordinality;
END;
$$;

-- Store one answer or judge call. p_call: {"question_id", "pipeline", "purpose": "answer"|"judge",
-- "model", "status": "completed"|"failed", "error", "simulated": bool, "usage": {input_tokens,
-- cache_read_input_tokens, cache_creation_5m_input_tokens, cache_creation_1h_input_tokens,
-- output_tokens}, "started_at", "finished_at", "latency_ms"}. The price snapshot is the model's
-- in the registry now. Malformed: EM112.
CREATE OR REPLACE FUNCTION ember.eval_record_call(p_run bigint, p_call jsonb)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    md ember.models;
    v_id bigint;
BEGIN
    PERFORM ember.eval_running(p_run);
    IF jsonb_typeof(p_call) IS DISTINCT FROM 'object'
       OR p_call ->> 'pipeline' IS NULL OR p_call ->> 'pipeline' NOT IN ('steward', 'shadow')
       OR p_call ->> 'purpose' IS NULL OR p_call ->> 'purpose' NOT IN ('answer', 'judge')
       OR p_call ->> 'status' IS NULL OR p_call ->> 'status' NOT IN ('completed', 'failed')
       OR (p_call ->> 'status' = 'failed') <> (coalesce(p_call ->> 'error', '') <> '')
       OR jsonb_typeof(p_call -> 'simulated') IS DISTINCT FROM 'boolean'
       OR p_call ->> 'started_at' IS NULL OR p_call ->> 'finished_at' IS NULL THEN
        PERFORM ember.eval_bad_record('eval_record_call', format('malformed call %s', left(p_call::text, 200)));
    END IF;
    IF ember.call_usage_malformed(p_call) THEN
        PERFORM ember.eval_bad_record('eval_record_call', 'usage and latency_ms must be non-negative integers');
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM ember.eval_questions WHERE run_id = p_run AND question_id = p_call ->> 'question_id'
    ) THEN
        PERFORM ember.eval_bad_record('eval_record_call', format('unknown question %s',
                                                                  coalesce(to_json(p_call ->> 'question_id')::text, 'NULL')));
    END IF;
    SELECT * INTO md FROM ember.models WHERE id = p_call ->> 'model';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'eval_record_call: unknown model "%"', p_call ->> 'model' USING ERRCODE = 'EM113';
    END IF;
    INSERT INTO ember.eval_calls (
        run_id, question_id, pipeline, purpose, model, status, error, simulated,
        input_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens,
        price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
        started_at, finished_at, latency_ms, prompt_sha256
    ) VALUES (
        p_run, p_call ->> 'question_id', p_call ->> 'pipeline', p_call ->> 'purpose', md.id, p_call ->> 'status',
        nullif(p_call ->> 'error', ''), (p_call ->> 'simulated')::boolean,
        coalesce((p_call #>> '{usage,input_tokens}')::bigint, 0),
        coalesce((p_call #>> '{usage,cache_read_input_tokens}')::bigint, 0),
        coalesce((p_call #>> '{usage,cache_creation_5m_input_tokens}')::bigint, 0),
        coalesce((p_call #>> '{usage,cache_creation_1h_input_tokens}')::bigint, 0),
        coalesce((p_call #>> '{usage,output_tokens}')::bigint, 0),
        md.price_as_of, md.price_input, md.price_output, md.price_cache_write_5m, md.price_cache_write_1h,
        md.price_cache_read,
        (p_call ->> 'started_at')::timestamptz, (p_call ->> 'finished_at')::timestamptz,
        (p_call ->> 'latency_ms')::bigint,
        ember.prompt_digest(p_call -> 'prompt_sha256', format('eval run %s, call for question %s', p_run,
                                                              to_json(p_call ->> 'question_id')))
    )
    RETURNING id INTO v_id;
    RETURN v_id;
END;
$$;

-- An eval call copies its model's length tiers with its prices, like every run.
CREATE OR REPLACE TRIGGER eval_calls_price_tiers BEFORE INSERT ON ember.eval_calls
FOR EACH ROW EXECUTE FUNCTION ember.copy_price_tiers();

-- eval_record_answer's first stage: an answer of the shape documented there, judged with its
-- verdict and reason or failed with its error; EM112 otherwise.
CREATE OR REPLACE FUNCTION ember.eval_check_answer(p_answer jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_pipeline text := p_answer ->> 'pipeline';
BEGIN
    IF jsonb_typeof(p_answer) IS DISTINCT FROM 'object'
       OR v_pipeline IS NULL OR v_pipeline NOT IN ('steward', 'shadow')
       OR p_answer ->> 'status' IS NULL OR p_answer ->> 'status' NOT IN ('judged', 'failed')
       OR NOT ember.jsonb_is_count(p_answer -> 'context_tokens')
       OR jsonb_typeof(p_answer -> 'search_ms') IS DISTINCT FROM 'number' OR (p_answer ->> 'search_ms')::numeric < 0
       OR jsonb_typeof(coalesce(p_answer -> 'shown', '[]')) <> 'array'
       OR jsonb_typeof(coalesce(p_answer -> 'cited', '[]')) <> 'array' THEN
        PERFORM ember.eval_bad_record('eval_record_answer', format('malformed answer %s', left(p_answer::text, 200)));
    END IF;
    IF p_answer ->> 'status' = 'judged' AND (
        p_answer ->> 'verdict' IS NULL OR p_answer ->> 'verdict' NOT IN ('correct', 'wrong')
        OR jsonb_typeof(p_answer -> 'answer') IS DISTINCT FROM 'string'
        OR coalesce(btrim(p_answer ->> 'reason'), '') = '') THEN
        PERFORM ember.eval_bad_record('eval_record_answer', 'a judged answer needs its answer, a verdict (correct or wrong) and the judge''s reason');
    END IF;
    IF p_answer ->> 'status' = 'failed' AND coalesce(btrim(p_answer ->> 'error'), '') = '' THEN
        PERFORM ember.eval_bad_record('eval_record_answer', 'a failed answer needs its error');
    END IF;
END;
$$;

-- Store one pipeline's answer to one question, with what it was shown. p_answer:
-- {"question_id", "pipeline", "status": "judged"|"failed", "answer", "verdict": "correct"|"wrong",
-- "reason", "error", "context_tokens", "search_ms", "shown": [{"rank", "fact_id"|"proposal_id",
-- "score"}], "cited": [rank, ...]}. A shown steward item must be a fact, a shown shadow item a
-- valid proposal of the question's conversation; an excluded question is never answered.
-- Malformed or out of place: EM112; an answer stored already: EM112 too (an answer is final).
CREATE OR REPLACE FUNCTION ember.eval_record_answer(
    p_run bigint, p_answer jsonb, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    q ember.eval_questions;
    v_thread text;
    v_pipeline text := p_answer ->> 'pipeline';
    v_bad text;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.eval_running(p_run);
    PERFORM ember.eval_check_answer(p_answer);
    SELECT * INTO q FROM ember.eval_questions WHERE run_id = p_run AND question_id = p_answer ->> 'question_id';
    IF NOT FOUND THEN
        PERFORM ember.eval_bad_record('eval_record_answer', format('unknown question %s',
                                                                    coalesce(to_json(p_answer ->> 'question_id')::text, 'NULL')));
    END IF;
    IF q.excluded THEN
        PERFORM ember.eval_bad_record('eval_record_answer', format('question %s is excluded: it is never answered',
                                                                    to_json(q.question_id)));
    END IF;
    IF EXISTS (
        SELECT 1 FROM ember.eval_answers
        WHERE run_id = p_run AND question_id = q.question_id AND pipeline = v_pipeline
    ) THEN
        PERFORM ember.eval_bad_record('eval_record_answer', format('%s already answered question %s', v_pipeline,
                                                                    to_json(q.question_id)));
    END IF;
    SELECT c.thread_id INTO v_thread FROM ember.eval_conversations AS c
    WHERE c.run_id = p_run AND c.conversation = q.conversation;

    SELECT format('shown[%s]', s.ordinality - 1) INTO v_bad
    FROM jsonb_array_elements(coalesce(p_answer -> 'shown', '[]')) WITH ORDINALITY AS s (value, ordinality)
    WHERE NOT ember.jsonb_is_count(s.value -> 'rank') OR (s.value ->> 'rank')::numeric = 0
       OR CASE v_pipeline
              WHEN 'steward' THEN NOT ember.jsonb_is_count(s.value -> 'fact_id') OR NOT EXISTS (
                  SELECT 1 FROM ember.facts AS f WHERE f.id = (s.value ->> 'fact_id')::bigint)
              ELSE NOT ember.jsonb_is_count(s.value -> 'proposal_id') OR NOT EXISTS (
                  SELECT 1 FROM ember.shadow_proposals AS p
                  WHERE p.id = (s.value ->> 'proposal_id')::bigint AND p.thread_id = v_thread
                    AND p.validation_error IS NULL)
          END
    ORDER BY s.ordinality
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        PERFORM ember.eval_bad_record('eval_record_answer', format('%s is not %s memory of this conversation',
                                                                    v_bad, v_pipeline));
    END IF;

    INSERT INTO ember.eval_answers (
        run_id, question_id, pipeline, status, answer, verdict, reason, error, context_tokens, search_ms,
        recorded_at
    ) VALUES (
        p_run, q.question_id, v_pipeline, p_answer ->> 'status', p_answer ->> 'answer',
        CASE WHEN p_answer ->> 'status' = 'judged' THEN p_answer ->> 'verdict' END,
        CASE WHEN p_answer ->> 'status' = 'judged' THEN p_answer ->> 'reason' END,
        CASE WHEN p_answer ->> 'status' = 'failed' THEN p_answer ->> 'error' END,
        (p_answer ->> 'context_tokens')::integer, (p_answer ->> 'search_ms')::double precision, p_now
    );
    INSERT INTO ember.eval_context (run_id, question_id, pipeline, rank, fact_id, proposal_id, score, cited)
    SELECT p_run, q.question_id, v_pipeline, (s.value ->> 'rank')::integer,
           (s.value ->> 'fact_id')::bigint, (s.value ->> 'proposal_id')::bigint,
           (s.value ->> 'score')::double precision,
           coalesce(p_answer -> 'cited', '[]') @> jsonb_build_array((s.value ->> 'rank')::integer)
    FROM jsonb_array_elements(coalesce(p_answer -> 'shown', '[]')) AS s (value);
END;
$$;

CREATE OR REPLACE FUNCTION ember.eval_finish(
    p_run bigint, p_error text DEFAULT NULL, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.eval_running(p_run);
    UPDATE ember.eval_runs
    SET status = CASE WHEN p_error IS NULL THEN 'completed' ELSE 'failed' END, error = p_error, finished_at = p_now
    WHERE id = p_run;
END;
$$;

-- A list-price estimate of a run before it starts. p_items: [{"role", "model", "calls",
-- "input_tokens", "output_tokens"}], the token counts estimated by the caller from the file (see
-- docs/eval.md for how). A NULL model is routed as the run would route it: the steward's model for
-- "steward", the first light model for "shadow" (its cold path) and "answer", the first standard
-- model for "judge" (eval_begin's defaults). Every input token is priced as
-- uncached input, which can only overstate. A model without a price makes its row NULL.
CREATE OR REPLACE FUNCTION ember.eval_estimate(p_items jsonb)
RETURNS TABLE (
    role text,
    model text,
    calls bigint,
    input_tokens bigint,
    output_tokens bigint,
    estimated_usd numeric
)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_bad text;
BEGIN
    IF jsonb_typeof(p_items) IS DISTINCT FROM 'array' THEN
        PERFORM ember.eval_bad_record('eval_estimate', 'items must be a JSON array');
    END IF;
    SELECT format('items[%s]', i.ordinality - 1) INTO v_bad
    FROM jsonb_array_elements(p_items) WITH ORDINALITY AS i (value, ordinality)
    WHERE coalesce(btrim(i.value ->> 'role'), '') = ''
       OR NOT ember.jsonb_is_count(i.value -> 'calls')
       OR NOT ember.jsonb_is_count(i.value -> 'input_tokens')
       OR NOT ember.jsonb_is_count(i.value -> 'output_tokens')
       OR (i.value ->> 'model' IS NULL AND i.value ->> 'role' NOT IN ('steward', 'shadow', 'answer', 'judge'))
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        PERFORM ember.eval_bad_record('eval_estimate', v_bad || ' needs a role, counts, and a model unless it is steward, shadow, answer or judge');
    END IF;
    SELECT i.value ->> 'model' INTO v_bad
    FROM jsonb_array_elements(p_items) AS i (value)
    WHERE i.value ->> 'model' IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.models AS m WHERE m.id = i.value ->> 'model')
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'eval_estimate: unknown model "%"', v_bad USING ERRCODE = 'EM113';
    END IF;
    RETURN QUERY
    WITH items AS (
        SELECT i.ordinality, i.value ->> 'role' AS role,
               coalesce(i.value ->> 'model', CASE i.value ->> 'role'
                   WHEN 'steward' THEN ember.steward_model(ember.sole_tenant())
                   WHEN 'judge' THEN ember.route_model('standard', '{}')
                   ELSE ember.route_model('light', '{}') END) AS model,
               (i.value ->> 'calls')::bigint AS calls,
               (i.value ->> 'input_tokens')::bigint AS input_tokens,
               (i.value ->> 'output_tokens')::bigint AS output_tokens
        FROM jsonb_array_elements(p_items) WITH ORDINALITY AS i (value, ordinality)
    )
    SELECT it.role, it.model, it.calls, it.input_tokens, it.output_tokens,
           -- Priced per call (the tokens spread evenly over the calls, rounded up), so that a
           -- length tier applies to a request that long, not to the sum of many short ones.
           round(ember.run_cost_usd(
               ceil(it.input_tokens::numeric / greatest(it.calls, 1))::bigint, 0, 0, 0,
               ceil(it.output_tokens::numeric / greatest(it.calls, 1))::bigint,
               md.price_input, md.price_output, md.price_cache_write_5m, md.price_cache_write_1h,
               md.price_cache_read, ember.model_price_tiers_json(md.id)
           ) * greatest(it.calls, 1), 6)
    FROM items AS it
    LEFT JOIN ember.models AS md ON md.id = it.model
    ORDER BY it.ordinality;
END;
$$;
