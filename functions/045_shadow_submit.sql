-- The single write procedure of the shadow pipeline (issue 4 item 11): the worker's outcome of
-- one claimed run goes into the database here and nowhere else, in one transaction. It writes
-- the run row and shadow_proposals; never messages.episode_id, and facts only through promotion
-- in a cut-over scope (invariant 3), which a trigger on shadow_proposals does (098_cutover_promote.sql).

-- The outcome envelope's first error, or NULL when it is well formed:
--   {"status": "completed"|"failed", "error": text|null,
--    "usage": {"input_tokens", "cache_read_input_tokens", "cache_creation_5m_input_tokens",
--              "cache_creation_1h_input_tokens", "output_tokens": non-negative integers},
--    "latency_ms": non-negative integer, "finished_at": timestamptz text (optional),
--    "proposals": [ ... ], "prompt_sha256": the prompt text's digest (optional, ember.prompt_digest)}
-- Every key but finished_at is required and no other key is allowed: the envelope is written
-- by our own worker, so a missing or misspelt key is a bug to surface, not a default to guess.
-- A failed run carries its error text and no proposals; a completed run carries no error.
-- The proposals themselves are not judged here: a bad proposal is stored with its own
-- validation_error (shadow_proposal_error) and does not refuse the run.
--
-- Its length: one IF per field of the outcome envelope, each naming the field it refuses; the
-- checks share nothing to factor out, and the list reads as the envelope's specification.
CREATE OR REPLACE FUNCTION ember.shadow_outcome_error(p_outcome jsonb)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_allowed constant text[] := ARRAY[
        'status', 'error', 'usage', 'latency_ms', 'finished_at', 'proposals', 'diagnostics',
        'prompt_sha256'
    ];
    v_required constant text[] := ARRAY['status', 'error', 'usage', 'latency_ms', 'proposals'];
    v_usage_keys constant text[] := ARRAY[
        'input_tokens', 'cache_read_input_tokens', 'cache_creation_5m_input_tokens',
        'cache_creation_1h_input_tokens', 'output_tokens'
    ];
    v_keys text[];
    v_key text;
    v_reason text;
BEGIN
    IF p_outcome IS NULL OR jsonb_typeof(p_outcome) <> 'object' THEN
        RETURN format('the outcome must be a JSON object, got %s', coalesce(jsonb_typeof(p_outcome), 'nothing'));
    END IF;
    SELECT array_agg(k ORDER BY k) INTO v_keys FROM jsonb_object_keys(p_outcome) AS k;
    SELECT string_agg(k, ', ') INTO v_key FROM unnest(v_keys) AS k WHERE k <> ALL (v_allowed);
    IF v_key IS NOT NULL THEN
        RETURN format('unknown outcome field(s): %s', v_key);
    END IF;
    SELECT string_agg(k, ', ') INTO v_key FROM unnest(v_required) AS k WHERE NOT p_outcome ? k;
    IF v_key IS NOT NULL THEN
        RETURN format('missing outcome field(s): %s', v_key);
    END IF;

    IF jsonb_typeof(p_outcome -> 'status') <> 'string'
       OR p_outcome ->> 'status' NOT IN ('completed', 'failed') THEN
        RETURN format('status must be "completed" or "failed", got %s', p_outcome -> 'status');
    END IF;
    -- The response's diagnostics object, kept as the API gave it (cache_miss_reason).
    IF jsonb_typeof(p_outcome -> 'diagnostics') NOT IN ('object', 'null') THEN
        RETURN format('diagnostics must be an object or null, got %s', jsonb_typeof(p_outcome -> 'diagnostics'));
    END IF;
    IF jsonb_typeof(p_outcome -> 'error') NOT IN ('string', 'null') THEN
        RETURN format('error must be a string or null, got %s', jsonb_typeof(p_outcome -> 'error'));
    END IF;
    IF p_outcome ->> 'status' = 'failed' AND coalesce(btrim(p_outcome ->> 'error'), '') = '' THEN
        RETURN 'a failed run needs an error text';
    END IF;
    IF p_outcome ->> 'status' = 'completed' AND p_outcome ->> 'error' IS NOT NULL THEN
        RETURN 'a completed run carries no error; report it as failed';
    END IF;

    IF jsonb_typeof(p_outcome -> 'usage') <> 'object' THEN
        RETURN format('usage must be an object, got %s', jsonb_typeof(p_outcome -> 'usage'));
    END IF;
    SELECT string_agg(k, ', ') INTO v_key
    FROM jsonb_object_keys(p_outcome -> 'usage') AS k WHERE k <> ALL (v_usage_keys);
    IF v_key IS NOT NULL THEN
        RETURN format('unknown usage field(s): %s', v_key);
    END IF;
    FOREACH v_key IN ARRAY v_usage_keys LOOP
        IF NOT ember.jsonb_is_count(p_outcome -> 'usage' -> v_key) THEN
            RETURN format('usage.%s must be a non-negative integer, got %s',
                          v_key, coalesce((p_outcome -> 'usage' -> v_key)::text, 'nothing'));
        END IF;
    END LOOP;
    IF NOT ember.jsonb_is_count(p_outcome -> 'latency_ms') THEN
        RETURN format('latency_ms must be a non-negative integer, got %s', p_outcome -> 'latency_ms');
    END IF;

    v_reason := ember.reported_time_error('finished_at', p_outcome -> 'finished_at');
    IF v_reason IS NOT NULL THEN
        RETURN v_reason;
    END IF;

    IF jsonb_typeof(p_outcome -> 'proposals') <> 'array' THEN
        RETURN format('proposals must be an array, got %s', jsonb_typeof(p_outcome -> 'proposals'));
    END IF;
    IF p_outcome ->> 'status' = 'failed' AND jsonb_array_length(p_outcome -> 'proposals') > 0 THEN
        RETURN 'a failed run carries no proposals';
    END IF;
    RETURN NULL;
END;
$$;

-- One proposal's error, or NULL when it may be stored as valid: an object with exactly a
-- non-blank "text", an "evidence_kind" and "evidence" that check_evidence accepts in shadow
-- mode (every pointer and its lineage in p_thread, no pointer twice, and, given the run's seen
-- sets, only rows and generations its model saw).
DROP FUNCTION IF EXISTS ember.shadow_proposal_error(text, jsonb);
CREATE OR REPLACE FUNCTION ember.shadow_proposal_error(
    p_thread text, p_proposal jsonb,
    p_seen_messages bigint[] DEFAULT NULL, p_seen_generations uuid[] DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_extra text;
BEGIN
    IF p_proposal IS NULL OR jsonb_typeof(p_proposal) <> 'object' THEN
        RETURN format('a proposal must be an object, got %s', coalesce(jsonb_typeof(p_proposal), 'nothing'));
    END IF;
    SELECT string_agg(k, ', ' ORDER BY k) INTO v_extra
    FROM jsonb_object_keys(p_proposal) AS k WHERE k NOT IN ('text', 'evidence_kind', 'evidence');
    IF v_extra IS NOT NULL THEN
        RETURN format('unknown proposal field(s): %s', v_extra);
    END IF;
    IF jsonb_typeof(p_proposal -> 'text') IS DISTINCT FROM 'string' OR btrim(p_proposal ->> 'text') = '' THEN
        RETURN 'text must be a non-empty string';
    END IF;
    IF jsonb_typeof(p_proposal -> 'evidence_kind') IS DISTINCT FROM 'string' THEN
        RETURN 'evidence_kind must be a string';
    END IF;
    RETURN ember.check_evidence(p_thread, p_proposal ->> 'evidence_kind', p_proposal -> 'evidence', true,
                                p_seen_messages, p_seen_generations);
END;
$$;

-- Record the outcome of run p_run, claimed with lease p_lease_token. Returns
-- {"run_id", "status", "proposals", "valid", "rejected"} (counts of stored proposal rows).
--
-- Refused with a named error and nothing written (docs/errors.md): an unknown run (EM040), a
-- wrong lease token (EM041), an expired lease (EM042), a run that is no longer running
-- (EM043: completed, failed, cancelled, or abandoned by tick), a malformed envelope (EM044).
--
-- A run claimed on the database's clock (its started_at is the clock at the claim,
-- claimed_clock) is judged on that clock: the lease holds if the submit arrives before it
-- expires, and the outcome's finished_at is only recorded, kept between the start and the
-- clock, so a back-dated finished_at cannot pass a lapsed lease and a worker whose clock runs
-- fast or slow is not refused on time. A run claimed with a simulated "now" (p_now in tests,
-- ember eval) is judged on its outcome's finished_at, else the clock, as simulated time must
-- replay.
--
-- If cancel was requested (a human spoke in the thread while the run was out), the run is
-- recorded cancelled with error interrupted-by-user, its tokens and latency kept (they were
-- spent), and no proposal is stored. Otherwise every proposal is stored with its ordinal, the
-- run's thread and generation, and the generation's labels; each is validated on its own, so
-- an invalid one is kept with its validation_error and its valid siblings are stored normally.
--
-- Its length: the lease and status guards, then the run's update and the proposals, all under the
-- one lock order (thread, then run) that a split would restate in each part; benchmarked (B3, B11).
CREATE OR REPLACE FUNCTION ember.submit_shadow_run(
    p_tenant text, p_run bigint, p_lease_token uuid, p_outcome jsonb
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.shadow_runs;
    v_thread text;
    v_reason text;
    v_now timestamptz;
    v_lease_now timestamptz;
    v_status text;
    v_error text;
    v_labels text[];
    v_seen bigint[];
    p jsonb;
    i bigint;
    v_count integer := 0;
    v_rejected integer := 0;
    v_prompt text;
BEGIN
    SELECT sr.thread_id INTO v_thread FROM ember.shadow_runs AS sr WHERE sr.tenant_id = p_tenant AND sr.id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown shadow run % of tenant %', p_run, coalesce(quote_literal(p_tenant), 'none')
            USING ERRCODE = 'EM040';
    END IF;
    -- Lock order thread, then run: the same order as a human message's cancel (append_message
    -- locks the thread, then flags the thread's running run). Locking the run first would
    -- deadlock against it, because inserting a proposal takes a key-share lock on the thread
    -- through its foreign key. With this order a submit and a cancel simply take turns: the
    -- run is either cancelled with no proposals or completed before the cancel, never a mix.
    PERFORM 1 FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = v_thread FOR SHARE;
    SELECT * INTO r FROM ember.shadow_runs AS sr
    WHERE sr.tenant_id = p_tenant AND sr.id = p_run AND sr.thread_id = v_thread FOR UPDATE;

    IF r.status <> 'running' THEN
        RAISE EXCEPTION 'shadow run % is %, not running: its outcome cannot be recorded', p_run, r.status
            USING ERRCODE = 'EM043',
                  HINT = CASE WHEN r.status = 'abandoned'
                              THEN 'its lease expired and tick() abandoned it; the thread will be offered again'
                              ELSE 'an outcome is recorded once' END;
    END IF;
    IF p_lease_token IS NULL THEN
        RAISE EXCEPTION 'shadow run %: the lease token is missing', p_run
            USING ERRCODE = 'EM041', HINT = 'pass the lease_token that claim_shadow_run() returned';
    END IF;
    IF p_lease_token <> r.lease_token THEN
        RAISE EXCEPTION 'shadow run %: the lease token does not match; the run is held by another claim', p_run
            USING ERRCODE = 'EM041';
    END IF;
    v_reason := ember.shadow_outcome_error(p_outcome);
    IF v_reason IS NOT NULL THEN
        RAISE EXCEPTION 'shadow run %: malformed outcome: %', p_run, v_reason USING ERRCODE = 'EM044';
    END IF;
    v_prompt := ember.prompt_digest(p_outcome -> 'prompt_sha256', format('shadow run %s', p_run));
    SELECT t.lease_now, t.recorded_at INTO v_lease_now, v_now
    FROM ember.lease_times(r.started_at, r.claimed_clock, (p_outcome ->> 'finished_at')::timestamptz) AS t;
    IF v_lease_now >= r.lease_expires_at THEN
        RAISE EXCEPTION 'shadow run %: the lease expired at %, the outcome is from %', p_run,
            r.lease_expires_at, v_lease_now
            USING ERRCODE = 'EM042', HINT = 'the run will be abandoned and its thread offered again';
    END IF;
    IF v_now < r.started_at THEN
        RAISE EXCEPTION 'shadow run %: malformed outcome: finished at % before it started at %', p_run,
            v_now, r.started_at
            USING ERRCODE = 'EM044';
    END IF;

    -- Flagged by a human message, or by sealing the thread (both through shadow_withdraw).
    IF r.cancel_requested THEN
        v_status := 'cancelled';
        v_error := CASE WHEN ember.is_isolated(r.tenant_id, r.thread_id) THEN 'thread-isolated' ELSE 'interrupted-by-user' END;
    ELSE
        v_status := p_outcome ->> 'status';
        v_error := p_outcome ->> 'error';
    END IF;

    UPDATE ember.shadow_runs SET
        status = v_status,
        error = v_error,
        input_tokens = (p_outcome #>> '{usage,input_tokens}')::bigint,
        cache_read_tokens = (p_outcome #>> '{usage,cache_read_input_tokens}')::bigint,
        cache_write_5m_tokens = (p_outcome #>> '{usage,cache_creation_5m_input_tokens}')::bigint,
        cache_write_1h_tokens = (p_outcome #>> '{usage,cache_creation_1h_input_tokens}')::bigint,
        output_tokens = (p_outcome #>> '{usage,output_tokens}')::bigint,
        latency_ms = (p_outcome ->> 'latency_ms')::bigint,
        cache_diagnostics = nullif(p_outcome -> 'diagnostics', 'null'::jsonb),
        prompt_sha256 = v_prompt,
        finished_at = v_now
    WHERE tenant_id = r.tenant_id AND id = r.id AND thread_id = r.thread_id;

    IF v_status = 'completed' THEN
        -- The categories the shadow call carried: what its generation had read.
        v_labels := coalesce(ember.generation_labels(r.generation_id), '{}');
        -- What the run's model saw: cold, the rows its pages rendered (the generation's rows above
        -- from_seq through through_seq); hot, the generation's rows through through_seq, which
        -- the replayed prefix and the question's row list held. And the generation itself.
        v_seen := ARRAY(
            SELECT m.id FROM ember.messages AS m
            WHERE m.tenant_id = r.tenant_id AND m.generation_id = r.generation_id AND m.seq <= r.through_seq
                AND (r.path = 'hot' OR m.seq > r.from_seq)
        );
        FOR p, i IN
            SELECT x.value, x.ordinality FROM jsonb_array_elements(p_outcome -> 'proposals') WITH ORDINALITY AS x
        LOOP
            v_reason := ember.shadow_proposal_error(r.thread_id, p, v_seen, ARRAY[r.generation_id]);
            INSERT INTO ember.shadow_proposals (
                tenant_id, run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence,
                categories, validation_error, created_at
            ) VALUES (
                r.tenant_id, p_run, r.thread_id, r.generation_id, i::integer,
                CASE WHEN jsonb_typeof(p -> 'text') = 'string' THEN p ->> 'text' END,
                CASE WHEN jsonb_typeof(p -> 'evidence_kind') = 'string' THEN p ->> 'evidence_kind' END,
                CASE WHEN jsonb_typeof(p) = 'object' THEN p -> 'evidence' END,
                v_labels, v_reason, v_now
            );
            v_count := v_count + 1;
            IF v_reason IS NOT NULL THEN
                v_rejected := v_rejected + 1;
            END IF;
        END LOOP;
        -- The stored rows decide: the bounds trigger (056_output_bounds.sql) may reject more.
        SELECT count(*) INTO v_rejected FROM ember.shadow_proposals AS sp
        WHERE sp.tenant_id = r.tenant_id AND sp.run_id = p_run AND sp.validation_error IS NOT NULL;
    END IF;

    RETURN jsonb_build_object(
        'run_id', p_run,
        'status', v_status,
        'proposals', v_count,
        'valid', v_count - v_rejected,
        'rejected', v_rejected
    );
END;
$$;
