-- steward_step(): the one write procedure of a steward round. The worker hands over the model's
-- raw response; in one transaction it becomes the steward's assistant row, each tool_use block is
-- applied in order (functions/052_steward_tools.sql) and answered by a tool_result row, and the
-- results go back to the worker for the next call. A bad tool call is answered with is_error and
-- the run goes on; only a bad envelope (the worker's own bug) or a bad lease refuses the step.

-- The run, locked, when the caller may write to it; otherwise the named refusal. "Now" is a
-- parameter so tests can let a lease lapse without sleeping.
CREATE OR REPLACE FUNCTION ember.steward_run_for_write(
    p_tenant text, p_run bigint, p_lease_token uuid, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS ember.steward_runs
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
BEGIN
    PERFORM ember.require_now(p_now);
    -- Lock order steward thread, then run: the same order as claim_steward_run.
    SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown steward run % of tenant %', coalesce(p_run::text, 'NULL'),
            coalesce(quote_literal(p_tenant), 'none')
            USING ERRCODE = 'EM061';
    END IF;
    PERFORM ember.lock_thread(p_tenant, r.thread_id);
    SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run AND thread_id = r.thread_id
    FOR UPDATE;
    IF p_lease_token IS NULL OR p_lease_token <> r.lease_token THEN
        RAISE EXCEPTION 'steward run %: the lease token does not match; the run is held by another claim', p_run
            USING ERRCODE = 'EM062';
    END IF;
    IF r.status <> 'running' THEN
        RAISE EXCEPTION 'steward run % is %, not running', p_run, r.status
            USING ERRCODE = 'EM064',
                  HINT = CASE WHEN r.status = 'abandoned'
                              THEN 'its lease lapsed; its rows stay in the backlog for the next wake'
                              ELSE 'a run ends once' END;
    END IF;
    IF p_now >= r.lease_expires_at THEN
        RAISE EXCEPTION 'steward run %: the lease expired at %, the step is from %', p_run,
            r.lease_expires_at, p_now
            USING ERRCODE = 'EM063',
                  HINT = 'the next claim abandons the run; nothing it read was marked digested';
    END IF;
    RETURN r;
END;
$$;

-- Usage of one model response, as the Messages API reports it, added to the run: NULL when the
-- usage object is well formed, else the reason. Absent counters count as 0 (the API omits the
-- cache fields on some responses); present ones must be non-negative integers.
CREATE OR REPLACE FUNCTION ember.steward_usage_error(p_usage jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    k text;
BEGIN
    IF p_usage IS NULL OR jsonb_typeof(p_usage) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_usage) <> 'object' THEN
        RETURN format('usage must be an object, got %s', jsonb_typeof(p_usage));
    END IF;
    FOREACH k IN ARRAY ARRAY['input_tokens', 'output_tokens', 'cache_read_input_tokens'] LOOP
        IF p_usage ? k AND jsonb_typeof(p_usage -> k) <> 'null' AND NOT ember.jsonb_is_count(p_usage -> k) THEN
            RETURN format('usage.%s must be a non-negative integer, got %s', k, p_usage -> k);
        END IF;
    END LOOP;
    FOREACH k IN ARRAY ARRAY['ephemeral_5m_input_tokens', 'ephemeral_1h_input_tokens'] LOOP
        IF jsonb_typeof(p_usage -> 'cache_creation' -> k) IS NOT NULL
           AND jsonb_typeof(p_usage -> 'cache_creation' -> k) <> 'null'
           AND NOT ember.jsonb_is_count(p_usage -> 'cache_creation' -> k) THEN
            RETURN format('usage.cache_creation.%s must be a non-negative integer', k);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION ember.steward_add_usage(p_tenant text, p_run bigint, p_usage jsonb, p_latency_ms bigint)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE ember.steward_runs SET
        input_tokens = input_tokens + coalesce((p_usage ->> 'input_tokens')::bigint, 0),
        output_tokens = output_tokens + coalesce((p_usage ->> 'output_tokens')::bigint, 0),
        cache_read_tokens = cache_read_tokens + coalesce((p_usage ->> 'cache_read_input_tokens')::bigint, 0),
        cache_write_5m_tokens = cache_write_5m_tokens
            + coalesce((p_usage #>> '{cache_creation,ephemeral_5m_input_tokens}')::bigint, 0),
        cache_write_1h_tokens = cache_write_1h_tokens
            + coalesce((p_usage #>> '{cache_creation,ephemeral_1h_input_tokens}')::bigint, 0),
        latency_ms = latency_ms + coalesce(p_latency_ms, 0)
    WHERE tenant_id = p_tenant AND id = p_run
$$;

-- What the worker sends back when the model answered without any tool call: the steward's
-- only way to act is its tools, and only finish ends a run.
CREATE OR REPLACE FUNCTION ember.steward_reminder()
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT 'Act only through the tools: write_fact, merge_facts, retire_fact, search_memory. '
        || 'When everything worth keeping is written, call finish with the id of the last row you digested.'
$$;

-- steward_step's input, checked whole before anything is written: the response's content blocks,
-- the embeddings by tool_use id, the latency, the worker's rejections and the usage. EM065 names
-- the first that is malformed.
CREATE OR REPLACE FUNCTION ember.steward_response_check(
    p_run bigint, p_response jsonb, p_embeddings jsonb, p_latency_ms bigint, p_rejections jsonb
)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_reason text;
BEGIN
    IF p_response IS NULL OR jsonb_typeof(p_response) <> 'object'
       OR jsonb_typeof(p_response -> 'content') IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'steward run %: the response must be an object with a content array', p_run
            USING ERRCODE = 'EM065';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_response -> 'content') AS x (v)
               WHERE jsonb_typeof(x.v) <> 'object' OR jsonb_typeof(x.v -> 'type') IS DISTINCT FROM 'string') THEN
        RAISE EXCEPTION 'steward run %: every content block must be an object with a type', p_run
            USING ERRCODE = 'EM065';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_response -> 'content') AS x (v)
               WHERE x.v ->> 'type' = 'tool_use'
                 AND (jsonb_typeof(x.v -> 'id') IS DISTINCT FROM 'string'
                      OR jsonb_typeof(x.v -> 'name') IS DISTINCT FROM 'string')) THEN
        RAISE EXCEPTION 'steward run %: a tool_use block needs a string id and name', p_run
            USING ERRCODE = 'EM065';
    END IF;
    IF p_embeddings IS NOT NULL AND jsonb_typeof(p_embeddings) <> 'object' THEN
        RAISE EXCEPTION 'steward run %: embeddings must be an object keyed by tool_use id', p_run
            USING ERRCODE = 'EM065';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_each(coalesce(p_embeddings, '{}')) AS e WHERE NOT ember.is_embedding(e.value)) THEN
        RAISE EXCEPTION 'steward run %: every embedding must be an array of % numbers', p_run,
            ember.embedding_dimensions()
            USING ERRCODE = 'EM065';
    END IF;
    IF p_latency_ms IS NOT NULL AND p_latency_ms < 0 THEN
        RAISE EXCEPTION 'steward run %: latency must not be negative, got %', p_run, p_latency_ms
            USING ERRCODE = 'EM065';
    END IF;
    IF p_rejections IS NOT NULL AND (jsonb_typeof(p_rejections) <> 'object' OR EXISTS (
        SELECT 1 FROM jsonb_each(p_rejections) AS e WHERE jsonb_typeof(e.value) <> 'string')) THEN
        RAISE EXCEPTION 'steward run %: rejections must be an object of tool_use id to reason', p_run
            USING ERRCODE = 'EM065';
    END IF;
    v_reason := ember.steward_usage_error(p_response -> 'usage');
    IF v_reason IS NOT NULL THEN
        RAISE EXCEPTION 'steward run %: %', p_run, v_reason USING ERRCODE = 'EM065';
    END IF;
END;
$$;

-- Returns {"run_id", "status", "round", "finished", "results": [tool_result blocks], "reminder"}.
--   p_response           the Messages API response: an object with a "content" array of blocks
--                        (and "usage", "stop_reason", ...; kept verbatim in the assistant row)
--   p_embeddings         {tool_use id: [384 numbers]}: the embedding of a search_memory query or
--                        of a written fact's text, computed by the worker's embedder (SQL never
--                        embeds); a search without one matches text, a fact without one is
--                        embedded by the worker afterwards
--   p_latency_ms         how long the model call took, added to the run
--   p_rejections         {tool_use id: reason} for calls the worker's tool models refused
--                        (worker/ember/tools.py): answered is_error with that reason, never
--                        applied. The worker can only refuse more than SQL would, never accept more.
--   p_prompt_sha256      the digest of the steward prompt the request carried (ember.prompt_digest,
--                        EM140), recorded on the run; NULL keeps what an earlier round recorded
-- Refusals: EM061-EM064 (see steward_run_for_write), EM065 a malformed response or embedding
-- map. Rounds past steward_max_rounds are refused with EM064 after the run is failed.
--
-- Its length: after the response's checks (steward_response_check), the tool calls applied in
-- order and the lease judged again at the end; one transaction's sequence around one loop.
CREATE OR REPLACE FUNCTION ember.steward_step(
    p_tenant text,
    p_run bigint,
    p_lease_token uuid,
    p_response jsonb,
    p_embeddings jsonb DEFAULT '{}',
    p_latency_ms bigint DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp(),
    p_rejections jsonb DEFAULT '{}',
    p_prompt_sha256 text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
    v_text text;
    b jsonb;
    v_content text;
    v_error boolean;
    v_results jsonb[] := '{}';
    v_calls integer := 0;
    v_max_calls integer := ember.setting_int('steward_max_tool_calls');
    v_reminder text;
    v_started timestamptz := clock_timestamp();
    v_prompt text;
BEGIN
    r := ember.steward_run_for_write(p_tenant, p_run, p_lease_token, p_now);
    PERFORM ember.steward_response_check(p_run, p_response, p_embeddings, p_latency_ms, p_rejections);

    v_prompt := ember.prompt_digest(to_jsonb(p_prompt_sha256), format('steward run %s', p_run));

    PERFORM ember.steward_add_usage(p_tenant, p_run, p_response -> 'usage', p_latency_ms);
    UPDATE ember.steward_runs SET rounds = rounds + 1, prompt_sha256 = coalesce(v_prompt, prompt_sha256)
    WHERE tenant_id = p_tenant AND id = p_run RETURNING * INTO r;

    -- A thread this run read was sealed while the run was out. Every later round would send its
    -- rows again (the conversation starts with the pages), and a fact written now would come from
    -- them: the run fails here, before any tool applies and before the worker builds another
    -- request. Nothing is marked digested; the sealed rows are never offered again.
    IF EXISTS (SELECT 1 FROM ember.messages AS m
               WHERE m.tenant_id = p_tenant AND m.id = ANY(r.read_message_ids)
                   AND ember.is_isolated(p_tenant, m.thread_id)) THEN
        PERFORM ember.steward_end_failed(p_tenant, p_run, 'thread-isolated: a thread this run read was sealed', p_now);
        RETURN jsonb_build_object(
            'run_id', p_run, 'status', 'failed', 'round', r.rounds, 'finished', false,
            'results', '[]'::jsonb, 'reminder', NULL
        );
    END IF;

    SELECT coalesce(string_agg(x.v ->> 'text', E'\n' ORDER BY x.o), '') INTO v_text
    FROM jsonb_array_elements(p_response -> 'content') WITH ORDINALITY AS x (v, o)
    WHERE x.v ->> 'type' = 'text';
    PERFORM ember.append_steward_record(
        r.tenant_id, 'assistant', v_text, 'agent', (p_response -> 'content')::json, p_now => p_now
    );

    FOR b IN
        SELECT x.v FROM jsonb_array_elements(p_response -> 'content') WITH ORDINALITY AS x (v, o)
        WHERE x.v ->> 'type' = 'tool_use' ORDER BY x.o
    LOOP
        v_calls := v_calls + 1;
        IF v_calls > v_max_calls THEN
            -- Past the bound nothing applies (and nothing is embedded): each call is answered,
            -- as the API needs a result for every tool_use, so the model learns to spread its work.
            v_content := format('not applied: one response may make at most %s tool calls '
                                '(setting steward_max_tool_calls); make the rest in the next round', v_max_calls);
            v_error := true;
        ELSIF coalesce(p_rejections, '{}') ? (b ->> 'id') THEN
            v_content := p_rejections ->> (b ->> 'id');
            v_error := true;
        ELSE
            SELECT t.content, t.is_error INTO v_content, v_error FROM ember.steward_apply_tool(
                p_tenant, p_run, b ->> 'name', b -> 'input', coalesce(p_embeddings, '{}') -> (b ->> 'id'), p_now
            ) AS t;
        END IF;
        PERFORM ember.append_steward_record(
            r.tenant_id,
            -- A name the model invented may not be an identifier: the row keeps none rather than
            -- refusing the whole step (the result already says the tool does not exist).
            'tool_result', v_content, 'system', NULL, b ->> 'id',
            CASE WHEN ember.is_safe_tool_name(b ->> 'name') THEN b ->> 'name' END,
            CASE WHEN v_error THEN 'error' ELSE 'ok' END, p_now => p_now
        );
        -- Collected in an array and turned into JSON once at the end: appending to a jsonb
        -- value copies it, which made each call cost more than the one before.
        v_results := array_append(v_results, jsonb_build_object(
            'type', 'tool_result', 'tool_use_id', b ->> 'id',
            'content', v_content, 'is_error', v_error
        ));
    END LOOP;

    IF v_calls = 0 THEN
        v_reminder := ember.steward_reminder();
        PERFORM ember.append_steward_record(r.tenant_id, 'user', v_reminder, 'system', p_now => p_now);
    END IF;

    SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run;
    -- The lease judged again at the end, on the time the step took: a step that outlived its lease
    -- commits nothing (the next claim abandons the run), as a late step refused at the start would.
    IF p_now + (clock_timestamp() - v_started) >= r.lease_expires_at THEN
        RAISE EXCEPTION 'steward run %: the lease expired at % while the step ran (% to %)', p_run,
            r.lease_expires_at, p_now, p_now + (clock_timestamp() - v_started)
            USING ERRCODE = 'EM063',
                  HINT = 'the next claim abandons the run; nothing it read was marked digested';
    END IF;
    -- Out of rounds and not finished: the run fails here, so a worker that keeps calling cannot
    -- spend past the limit, and nothing is marked digested.
    IF r.status = 'running' AND r.rounds >= ember.setting_int('steward_max_rounds') THEN
        PERFORM ember.steward_end_failed(p_tenant, p_run, format('round limit: %s rounds without finish', r.rounds), p_now);
        SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run;
    END IF;

    RETURN jsonb_build_object(
        'run_id', p_run,
        'status', r.status,
        'round', r.rounds,
        'finished', r.status = 'completed',
        'results', to_jsonb(v_results),
        'reminder', v_reminder
    );
END;
$$;

-- End a run as failed: nothing it read is marked digested, and the facts it wrote stay (each was
-- valid when written, with its evidence; the backlog is offered again and may confirm them).
CREATE OR REPLACE FUNCTION ember.steward_end_failed(p_tenant text, p_run bigint, p_error text, p_now timestamptz)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE ember.steward_runs
    SET status = 'failed', error = p_error, finished_at = greatest(p_now, started_at)
    WHERE tenant_id = p_tenant AND id = p_run AND status = 'running'
$$;

-- The worker gives up on a run (a model error, a cancelled task, the round limit seen first by
-- the worker). p_usage and p_latency_ms account a last call that produced no step, and
-- p_prompt_sha256 records the prompt it was sent with, as in steward_step.
CREATE OR REPLACE FUNCTION ember.fail_steward_run(
    p_tenant text,
    p_run bigint,
    p_lease_token uuid,
    p_error text,
    p_usage jsonb DEFAULT NULL,
    p_latency_ms bigint DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp(),
    p_prompt_sha256 text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
    v_reason text;
    v_prompt text;
BEGIN
    r := ember.steward_run_for_write(p_tenant, p_run, p_lease_token, p_now);
    IF p_error IS NULL OR btrim(p_error) = '' THEN
        RAISE EXCEPTION 'steward run %: a failed run needs an error text', p_run USING ERRCODE = 'EM065';
    END IF;
    v_reason := ember.steward_usage_error(p_usage);
    IF v_reason IS NOT NULL THEN
        RAISE EXCEPTION 'steward run %: %', p_run, v_reason USING ERRCODE = 'EM065';
    END IF;
    IF p_latency_ms IS NOT NULL AND p_latency_ms < 0 THEN
        RAISE EXCEPTION 'steward run %: latency must not be negative, got %', p_run, p_latency_ms
            USING ERRCODE = 'EM065';
    END IF;
    v_prompt := ember.prompt_digest(to_jsonb(p_prompt_sha256), format('steward run %s', p_run));
    PERFORM ember.steward_add_usage(p_tenant, p_run, p_usage, p_latency_ms);
    UPDATE ember.steward_runs SET prompt_sha256 = coalesce(v_prompt, prompt_sha256)
    WHERE tenant_id = p_tenant AND id = p_run;
    PERFORM ember.steward_end_failed(p_tenant, p_run, p_error, p_now);
    RETURN jsonb_build_object('run_id', p_run, 'status', 'failed', 'error', p_error);
END;
$$;

-- Hand a running run back (the worker is shutting down): it ends abandoned, nothing it read is
-- marked digested, and the next claim offers the same rows at once instead of after the lease.
CREATE OR REPLACE FUNCTION ember.release_steward_run(
    p_tenant text, p_run bigint, p_lease_token uuid, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.steward_run_for_write(p_tenant, p_run, p_lease_token, p_now);
    UPDATE ember.steward_runs
    SET status = 'abandoned', error = 'released by its worker', finished_at = greatest(p_now, started_at)
    WHERE tenant_id = p_tenant AND id = p_run;
END;
$$;
