-- The consolidation job's one write procedure and the checks of each action (issue 25, item 3).
-- What the actions mean and why they are checked so: 100_consolidation.sql.

-- The pointers of a set of facts, each once, in fact and ordinal order.
CREATE OR REPLACE FUNCTION ember.facts_evidence_union(p_ids bigint[])
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(jsonb_agg(p.pointer ORDER BY p.first_fact, p.first_ordinal), '[]')
    FROM (
        SELECT CASE WHEN e.message_id IS NOT NULL THEN jsonb_build_object('message_id', e.message_id)
                    ELSE jsonb_build_object('generation_id', e.generation_id) END AS pointer,
            min(array_position(p_ids, e.fact_id)) AS first_fact, min(e.ordinal) AS first_ordinal
        FROM ember.fact_evidence AS e
        WHERE e.fact_id = ANY(p_ids)
        GROUP BY 1
    ) AS p
$$;

-- EM135 with the reason: a consolidation action that fails a check. Raised inside the action's
-- own subtransaction, so the action is recorded as refused and its siblings go on.
CREATE OR REPLACE FUNCTION ember.consolidation_refuse(p_reason text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION '%', p_reason USING ERRCODE = 'EM135';
END;
$$;

-- A merge: the facts (one evidence kind) become one new fact with the given text, the union of
-- their evidence and of their labels and sources; they point to it. Returns the new fact.
CREATE OR REPLACE FUNCTION ember.consolidation_merge(p_run bigint, p_ids bigint[], p_text text, p_now timestamptz)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_kinds text[];
    v_evidence jsonb;
    v_err text;
    v_id bigint;
BEGIN
    v_kinds := ARRAY(SELECT DISTINCT x.evidence_kind FROM ember.facts AS x WHERE x.id = ANY(p_ids));
    IF cardinality(v_kinds) <> 1 THEN
        PERFORM ember.consolidation_refuse(format('a merge keeps one evidence kind, these facts have %s',
                                                  array_to_string(v_kinds, ', ')));
    END IF;
    IF p_text IS NULL OR ember.clean_fact_text(p_text) = '' THEN
        PERFORM ember.consolidation_refuse('a merge needs the merged fact''s text');
    END IF;
    v_evidence := ember.facts_evidence_union(p_ids);
    v_err := ember.check_evidence(NULL, v_kinds[1], v_evidence, false);
    IF v_err IS NOT NULL THEN
        PERFORM ember.consolidation_refuse('the merged evidence fails its kind: ' || v_err);
    END IF;
    INSERT INTO ember.facts (text, evidence_kind, categories, source_threads, consolidation_run_id,
                             created_at, updated_at)
    SELECT p_text, v_kinds[1], ember.label_set(array_agg(c)), ember.label_set(array_agg(s)), p_run, p_now, p_now
    FROM ember.facts AS x
    LEFT JOIN LATERAL unnest(x.categories) AS c ON TRUE
    LEFT JOIN LATERAL unnest(x.source_threads) AS s ON TRUE
    WHERE x.id = ANY(p_ids)
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id, generation_id)
    SELECT v_id, x.ordinality, (x.value ->> 'message_id')::bigint, (x.value ->> 'generation_id')::uuid
    FROM jsonb_array_elements(v_evidence) WITH ORDINALITY AS x (value, ordinality);
    UPDATE ember.facts SET status = 'merged', merged_into = v_id, updated_at = p_now WHERE id = ANY(p_ids);
    RETURN v_id;
END;
$$;

-- A supersede of [older, newer]: the newer's evidence must start after the older's ends; the older
-- is closed where the newer becomes valid.
CREATE OR REPLACE FUNCTION ember.consolidation_supersede(p_ids bigint[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    o ember.facts;
    n ember.facts;
    v_old_last timestamptz;
    v_new_first timestamptz;
BEGIN
    SELECT * INTO o FROM ember.facts WHERE id = p_ids[1];
    SELECT * INTO n FROM ember.facts WHERE id = p_ids[2];
    SELECT max(coalesce(m.created_at, g.started_at)) INTO v_old_last
    FROM ember.fact_evidence AS e
    LEFT JOIN ember.messages AS m ON m.id = e.message_id
    LEFT JOIN ember.generations AS g ON g.id = e.generation_id
    WHERE e.fact_id = o.id;
    v_new_first := ember.fact_evidence_time(n.id);
    IF v_new_first IS NULL OR v_old_last IS NULL OR v_new_first <= v_old_last THEN
        PERFORM ember.consolidation_refuse(format(
            'supersede needs evidence newer than the fact it closes: fact %s''s evidence starts %s, '
            'fact %s''s ends %s', n.id, coalesce(v_new_first::text, 'nowhere'), o.id,
            coalesce(v_old_last::text, 'nowhere')));
    END IF;
    UPDATE ember.facts
    SET status = 'superseded', superseded_by = n.id,
        valid_until = greatest(coalesce(n.valid_from, v_new_first), coalesce(o.valid_from, v_new_first)),
        updated_at = p_now
    WHERE id = o.id;
END;
$$;

-- A retirement: only of a fact whose evidence no longer supports it, lost some to forgetting, or has
-- none left.
CREATE OR REPLACE FUNCTION ember.consolidation_retire(p_ids bigint[], p_reason text, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    f ember.facts;
    v_err text;
BEGIN
    SELECT * INTO f FROM ember.facts WHERE id = p_ids[1];
    v_err := ember.check_evidence(NULL, f.evidence_kind, ember.facts_evidence_union(ARRAY[f.id]), false);
    IF v_err IS NULL
       AND NOT EXISTS (SELECT 1 FROM ember.fact_history AS h WHERE h.fact_id = f.id AND h.change = 'evidence-shrunk')
       AND EXISTS (SELECT 1 FROM ember.fact_evidence AS e WHERE e.fact_id = f.id) THEN
        PERFORM ember.consolidation_refuse(format(
            'fact %s''s evidence still supports it and none of it was forgotten: flag it for a person instead',
            f.id));
    END IF;
    UPDATE ember.facts SET status = 'retired', retired_reason = 'consolidation: ' || p_reason, updated_at = p_now
    WHERE id = f.id;
END;
$$;

-- Apply one checked action; returns the fact a merge wrote. The facts must be active now (an
-- earlier action of the same run, or a steward wake, may have changed them since the plan). The
-- kind's own function runs between setting and clearing the settings the fact triggers read.
CREATE OR REPLACE FUNCTION ember.consolidation_apply(
    p_run bigint, p_action bigint, p_kind text, p_ids bigint[], p_text text, p_reason text,
    p_now timestamptz
)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    f ember.facts;
    v_id bigint;
BEGIN
    FOREACH v_id IN ARRAY p_ids LOOP
        SELECT * INTO f FROM ember.facts WHERE id = v_id FOR UPDATE;
        IF NOT FOUND OR f.status <> 'active' OR f.text IS NULL THEN
            PERFORM ember.consolidation_refuse(format('fact %s is %s now, not active', v_id,
                                                      coalesce(CASE WHEN f.text IS NULL THEN 'forgotten' END, f.status, 'gone')));
        END IF;
        -- Sealing stops every automated change (seal_thread aborts a steward call in flight the
        -- same way): a thread sealed since the claim puts its facts out of the job's reach.
        IF NOT ember.fact_visible(true, '{}', f.categories, f.source_threads) THEN
            PERFORM ember.consolidation_refuse(format(
                'fact %s is derived from a thread sealed since the claim; sealing stops every automated change',
                v_id));
        END IF;
    END LOOP;
    PERFORM set_config('ember.consolidation_run', p_run::text, true);
    PERFORM set_config('ember.consolidation_action', p_action::text, true);
    PERFORM set_config('ember.history_reason', p_reason, true);
    v_id := NULL;

    IF p_kind = 'merge' THEN
        v_id := ember.consolidation_merge(p_run, p_ids, p_text, p_now);
    ELSIF p_kind = 'supersede' THEN
        PERFORM ember.consolidation_supersede(p_ids, p_now);
    ELSIF p_kind = 'retire' THEN
        PERFORM ember.consolidation_retire(p_ids, p_reason, p_now);
    END IF;
    PERFORM set_config('ember.consolidation_run', '', true);
    PERFORM set_config('ember.consolidation_action', '', true);
    PERFORM set_config('ember.history_reason', '', true);
    RETURN v_id;
END;
$$;

-- The shape of one action, or the reason it is malformed. fact_ids must be facts the run was
-- shown, each once: merge two or more, supersede exactly [older, newer], retire one, flag two or
-- more (one for a doubt about a single fact).
CREATE OR REPLACE FUNCTION ember.consolidation_action_error(p_action jsonb, p_shown bigint[])
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_kind text := p_action ->> 'action';
    v_ids bigint[];
    v_n integer;
    v_max constant integer := ember.setting_int('max_fact_chars');
BEGIN
    IF jsonb_typeof(p_action) IS DISTINCT FROM 'object' THEN
        RETURN 'an action must be an object';
    END IF;
    IF v_kind IS NULL OR v_kind NOT IN ('merge', 'supersede', 'retire', 'flag') THEN
        RETURN format('action must be merge, supersede, retire or flag, got %s', coalesce(p_action ->> 'action', 'none'));
    END IF;
    IF jsonb_typeof(p_action -> 'fact_ids') IS DISTINCT FROM 'array'
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_action -> 'fact_ids') AS x WHERE NOT ember.jsonb_is_count(x)) THEN
        RETURN 'fact_ids must be a list of fact ids';
    END IF;
    v_ids := ARRAY(SELECT (x #>> '{}')::bigint FROM jsonb_array_elements(p_action -> 'fact_ids') AS x);
    v_n := cardinality(v_ids);
    IF (SELECT count(DISTINCT i) FROM unnest(v_ids) AS i) <> v_n THEN
        RETURN 'fact_ids names a fact twice';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(v_ids) AS i WHERE NOT i = ANY(p_shown)) THEN
        RETURN format('fact %s is not one this run was shown',
                      (SELECT i FROM unnest(v_ids) AS i WHERE NOT i = ANY(p_shown) LIMIT 1));
    END IF;
    IF (v_kind = 'merge' AND v_n < 2) OR (v_kind = 'supersede' AND v_n <> 2)
       OR (v_kind = 'retire' AND v_n <> 1) OR (v_kind = 'flag' AND v_n < 1) THEN
        RETURN format('%s takes %s', v_kind, CASE v_kind WHEN 'merge' THEN 'two or more facts'
                      WHEN 'supersede' THEN 'exactly [older, newer]' WHEN 'retire' THEN 'one fact'
                      ELSE 'one or more facts' END);
    END IF;
    IF jsonb_typeof(p_action -> 'reason') IS DISTINCT FROM 'string' OR btrim(p_action ->> 'reason') = '' THEN
        RETURN 'every action needs a reason';
    END IF;
    IF jsonb_typeof(p_action -> 'confidence') IS DISTINCT FROM 'number'
       OR (p_action ->> 'confidence')::numeric NOT BETWEEN 0 AND 1 THEN
        RETURN 'confidence must be a number from 0 to 1';
    END IF;
    IF v_kind = 'merge' AND jsonb_typeof(p_action -> 'text') IS DISTINCT FROM 'string' THEN
        RETURN 'a merge needs the merged fact''s text';
    END IF;
    -- Every text a model writes is bounded: over the bound the action is refused with its reason
    -- (the row keeps the text shortened) and its siblings go on.
    IF jsonb_typeof(p_action -> 'text') = 'string' AND length(p_action ->> 'text') > v_max THEN
        RETURN format('text is %s characters; a fact holds at most %s (setting max_fact_chars)',
                      length(p_action ->> 'text'), v_max);
    END IF;
    IF length(p_action ->> 'reason') > v_max THEN
        RETURN format('reason is %s characters; at most %s are taken (setting max_fact_chars)',
                      length(p_action ->> 'reason'), v_max);
    END IF;
    RETURN NULL;
END;
$$;

-- Why a consolidation outcome is malformed, naming the field, or NULL: status completed or
-- failed, usage a map of counts, latency_ms a count, finished_at a time Ember accepts, actions a
-- list, error a string. Each field is checked before anything casts it, so a bad one is EM130
-- with its name, never a raw cast or constraint error.
CREATE OR REPLACE FUNCTION ember.consolidation_outcome_error(p_outcome jsonb)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_key text;
BEGIN
    IF jsonb_typeof(p_outcome) IS DISTINCT FROM 'object' THEN
        RETURN format('the outcome must be a JSON object, got %s', coalesce(jsonb_typeof(p_outcome), 'nothing'));
    END IF;
    IF jsonb_typeof(p_outcome -> 'status') IS DISTINCT FROM 'string'
       OR p_outcome ->> 'status' NOT IN ('completed', 'failed') THEN
        RETURN format('status must be completed or failed, got %s', coalesce(left((p_outcome -> 'status')::text, 80), 'nothing'));
    END IF;
    IF p_outcome ? 'usage' AND jsonb_typeof(p_outcome -> 'usage') <> 'object' THEN
        RETURN format('usage must be an object of token counts, got %s', jsonb_typeof(p_outcome -> 'usage'));
    END IF;
    SELECT u.key INTO v_key FROM jsonb_each(coalesce(p_outcome -> 'usage', '{}')) AS u
    WHERE NOT ember.jsonb_is_count(u.value) ORDER BY u.key LIMIT 1;
    IF v_key IS NOT NULL THEN
        RETURN format('usage.%s must be a non-negative integer, got %s', left(v_key, 80),
                      left((p_outcome -> 'usage' -> v_key)::text, 80));
    END IF;
    IF p_outcome ? 'latency_ms' AND NOT ember.jsonb_is_count(p_outcome -> 'latency_ms') THEN
        RETURN format('latency_ms must be a non-negative integer, got %s', left((p_outcome -> 'latency_ms')::text, 80));
    END IF;
    IF p_outcome ? 'actions' AND jsonb_typeof(p_outcome -> 'actions') <> 'array' THEN
        RETURN format('actions must be a list, got %s', jsonb_typeof(p_outcome -> 'actions'));
    END IF;
    IF p_outcome ? 'error' AND jsonb_typeof(p_outcome -> 'error') NOT IN ('string', 'null') THEN
        RETURN format('error must be a string, got %s', jsonb_typeof(p_outcome -> 'error'));
    END IF;
    RETURN ember.reported_time_error('finished_at', p_outcome -> 'finished_at');
END;
$$;

-- The one write procedure of the consolidation pipeline. Refused as a whole: an unknown run
-- (EM131), another lease token (EM132), a lapsed lease (EM133), a run no longer running (EM134),
-- a malformed envelope (EM130). Each action is then checked alone and recorded as applied,
-- refused (with the failed check) or flagged.
--
-- Its length: the envelope and lease guards, then each action checked, recorded and applied in its
-- own exception block; one run's sequence under its row lock.
CREATE OR REPLACE FUNCTION ember.submit_consolidation_run(p_run bigint, p_lease_token uuid, p_outcome jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.consolidation_runs;
    v_now timestamptz;
    v_lease_now timestamptz;
    v_status text;
    a jsonb;
    i bigint;
    v_err text;
    v_action bigint;
    v_ids bigint[];
    v_state text;
    v_fact bigint;
    v_min numeric := (ember.setting('consolidation_min_confidence') #>> '{}')::numeric;
    v_max_chars constant integer := ember.setting_int('max_fact_chars');
    v_counts jsonb := '{"applied": 0, "refused": 0, "flagged": 0}';
    v_prompt text;
BEGIN
    SELECT * INTO r FROM ember.consolidation_runs WHERE id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'consolidation run % does not exist', coalesce(p_run::text, 'NULL') USING ERRCODE = 'EM131';
    END IF;
    IF p_lease_token IS DISTINCT FROM r.lease_token THEN
        RAISE EXCEPTION 'consolidation run %: the lease token does not match', p_run USING ERRCODE = 'EM132';
    END IF;
    IF r.status <> 'running' THEN
        RAISE EXCEPTION 'consolidation run % is %, not running', p_run, r.status USING ERRCODE = 'EM134';
    END IF;
    v_err := ember.consolidation_outcome_error(p_outcome);
    IF v_err IS NOT NULL THEN
        RAISE EXCEPTION 'consolidation run %: malformed outcome: %', p_run, v_err USING ERRCODE = 'EM130';
    END IF;
    v_prompt := ember.prompt_digest(p_outcome -> 'prompt_sha256', format('consolidation run %s', p_run));
    -- The lease on the database's clock (026_run_clock.sql), as for shadow: a back-dated
    -- finished_at passes no lapsed lease.
    SELECT t.lease_now, t.recorded_at INTO v_lease_now, v_now
    FROM ember.lease_times(r.started_at, r.claimed_clock, (p_outcome ->> 'finished_at')::timestamptz) AS t;
    IF v_lease_now >= r.lease_expires_at THEN
        RAISE EXCEPTION 'consolidation run %: the lease expired at %, the outcome is from %', p_run,
            r.lease_expires_at, v_lease_now USING ERRCODE = 'EM133';
    END IF;
    v_status := p_outcome ->> 'status';

    IF v_status = 'completed' THEN
        FOR a, i IN SELECT x.value, x.ordinality FROM jsonb_array_elements(coalesce(p_outcome -> 'actions', '[]')) WITH ORDINALITY AS x
        LOOP
            v_err := ember.consolidation_action_error(a, r.fact_ids);
            v_ids := CASE WHEN v_err IS NULL
                          THEN ARRAY(SELECT (x #>> '{}')::bigint FROM jsonb_array_elements(a -> 'fact_ids') AS x)
                          ELSE '{}' END;
            -- A doubt already waiting for a person is not queued twice: a low-frequency job sees
            -- the same facts again until someone decides.
            IF v_err IS NULL THEN
                SELECT format('already waiting for review as action %s', q.id) INTO v_err
                FROM ember.consolidation_actions AS q
                WHERE q.status = 'flagged' AND q.review IS NULL AND q.action = a ->> 'action'
                    AND q.fact_ids @> v_ids AND q.fact_ids <@ v_ids
                    AND (a ->> 'action' = 'flag' OR (a ->> 'confidence')::numeric < v_min)
                LIMIT 1;
            END IF;
            v_state := CASE WHEN v_err IS NOT NULL THEN 'refused'
                            WHEN a ->> 'action' = 'flag' OR (a ->> 'confidence')::numeric < v_min THEN 'flagged'
                            ELSE 'applied' END;
            INSERT INTO ember.consolidation_actions (
                run_id, ordinal, action, fact_ids, text, reason, confidence, evidence, status, error, created_at
            ) VALUES (
                p_run, i::integer,
                CASE WHEN a ->> 'action' IN ('merge', 'supersede', 'retire', 'flag') THEN a ->> 'action' ELSE 'flag' END,
                v_ids, CASE WHEN jsonb_typeof(a -> 'text') = 'string' THEN ember.shorten_text(a ->> 'text', v_max_chars) END,
                ember.shorten_text(coalesce(nullif(btrim(a ->> 'reason'), ''), '(none given)'), v_max_chars),
                CASE WHEN jsonb_typeof(a -> 'confidence') = 'number' AND (a ->> 'confidence')::numeric BETWEEN 0 AND 1
                     THEN (a ->> 'confidence')::numeric END,
                ember.facts_evidence_union(v_ids), v_state, v_err, v_now
            )
            RETURNING id INTO v_action;
            IF v_state = 'applied' THEN
                BEGIN
                    v_fact := ember.consolidation_apply(p_run, v_action, a ->> 'action', v_ids, a ->> 'text',
                                                        a ->> 'reason', v_now);
                    UPDATE ember.consolidation_actions SET result_fact = v_fact WHERE id = v_action;
                EXCEPTION WHEN SQLSTATE 'EM135' THEN
                    UPDATE ember.consolidation_actions SET status = 'refused', error = SQLERRM WHERE id = v_action;
                    v_state := 'refused';
                END;
            END IF;
            v_counts := jsonb_set(v_counts, ARRAY[v_state], to_jsonb((v_counts ->> v_state)::integer + 1));
        END LOOP;
    END IF;

    UPDATE ember.consolidation_runs SET
        status = v_status,
        error = p_outcome ->> 'error',
        actions = (SELECT count(*) FROM ember.consolidation_actions WHERE run_id = p_run),
        input_tokens = coalesce((p_outcome #>> '{usage,input_tokens}')::bigint, 0),
        cache_read_tokens = coalesce((p_outcome #>> '{usage,cache_read_input_tokens}')::bigint, 0),
        cache_write_5m_tokens = coalesce((p_outcome #>> '{usage,cache_creation_5m_input_tokens}')::bigint, 0),
        cache_write_1h_tokens = coalesce((p_outcome #>> '{usage,cache_creation_1h_input_tokens}')::bigint, 0),
        output_tokens = coalesce((p_outcome #>> '{usage,output_tokens}')::bigint, 0),
        latency_ms = coalesce((p_outcome ->> 'latency_ms')::bigint, 0),
        prompt_sha256 = v_prompt,
        finished_at = greatest(v_now, r.started_at)
    WHERE id = p_run;
    RETURN jsonb_build_object('run_id', p_run, 'status', v_status) || v_counts;
END;
$$;

-- Push a running run's lease forward, or hand it back (shutdown): refused like a submit.
CREATE OR REPLACE FUNCTION ember.release_consolidation_run(p_run bigint, p_lease_token uuid)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.consolidation_runs
    SET status = 'abandoned', error = 'released', finished_at = greatest(clock_timestamp(), started_at)
    WHERE id = p_run AND lease_token = p_lease_token AND status = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'consolidation run % is not running under this lease', p_run USING ERRCODE = 'EM134';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION ember.extend_consolidation_lease(
    p_run bigint, p_lease_token uuid, p_lease interval, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
    v_until timestamptz;
BEGIN
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a consolidation lease must be positive' USING ERRCODE = 'EM130';
    END IF;
    UPDATE ember.consolidation_runs SET lease_expires_at = ember.require_now(p_now) + p_lease
    WHERE id = p_run AND lease_token = p_lease_token AND status = 'running' AND lease_expires_at > ember.require_now(p_now)
    RETURNING lease_expires_at INTO v_until;
    IF v_until IS NULL THEN
        RAISE EXCEPTION 'consolidation run % is not running under this lease', p_run USING ERRCODE = 'EM134';
    END IF;
    RETURN v_until;
END;
$$;
