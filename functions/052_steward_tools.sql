-- The steward's tools, applied in SQL (the input schemas come from the pydantic models in
-- worker/ember/tools.py, which validate the same shapes before a call is sent back; this file
-- validates again because the database must not trust the worker). Each tool either writes and
-- answers with what it did, or raises EM066 with the reason, which steward_apply_tool turns into
-- an is_error tool_result: the model reads why and can correct itself, and the call's writes are
-- rolled back with its subtransaction while the run goes on.

CREATE OR REPLACE FUNCTION ember.steward_tool_error(p_reason text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION '%', p_reason USING ERRCODE = 'EM066';
END;
$$;

-- The input's keys must be exactly the allowed ones, the required ones present (the pydantic
-- models forbid extra keys too: an invented field is more likely a mistake than a hint).
CREATE OR REPLACE FUNCTION ember.steward_check_keys(p_input jsonb, p_required text[], p_optional text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_bad text;
BEGIN
    IF p_input IS NULL OR jsonb_typeof(p_input) <> 'object' THEN
        PERFORM ember.steward_tool_error(format('the input must be an object, got %s',
                                                coalesce(jsonb_typeof(p_input), 'nothing')));
    END IF;
    SELECT string_agg(k, ', ' ORDER BY k) INTO v_bad FROM jsonb_object_keys(p_input) AS k
    WHERE NOT k = ANY(p_required || p_optional);
    IF v_bad IS NOT NULL THEN
        PERFORM ember.steward_tool_error(format('unknown argument(s): %s', v_bad));
    END IF;
    SELECT string_agg(k, ', ' ORDER BY k) INTO v_bad FROM unnest(p_required) AS k WHERE NOT p_input ? k;
    IF v_bad IS NOT NULL THEN
        PERFORM ember.steward_tool_error(format('missing argument(s): %s', v_bad));
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION ember.steward_text_arg(p_input jsonb, p_key text)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    IF jsonb_typeof(p_input -> p_key) IS DISTINCT FROM 'string' OR btrim(p_input ->> p_key) = '' THEN
        PERFORM ember.steward_tool_error(format('%s must be a non-empty string', p_key));
    END IF;
    RETURN btrim(p_input ->> p_key);
END;
$$;

CREATE OR REPLACE FUNCTION ember.steward_id_arg(p_value jsonb, p_name text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT ember.jsonb_is_count(p_value) OR (p_value #>> '{}')::numeric = 0 THEN
        PERFORM ember.steward_tool_error(format('%s must be a positive integer, got %s', p_name,
                                                coalesce(p_value::text, 'nothing')));
    END IF;
    RETURN (p_value #>> '{}')::bigint;
END;
$$;

-- The steward's evidence rule, or NULL when it holds: the shared check_evidence in steward mode
-- (any thread but an isolated one or the steward's own record; no pointer twice), then
-- evidence_seen_error held to what this run saw: a row it read, or a generation it read. A model
-- cannot have seen anything else, so a pointer elsewhere is invented even when the row exists.
-- Its own record's rows (the tool results it got back) were seen too, but are no evidence: a
-- search_memory answer only repeats fact texts, and check_evidence refuses them by name. The kind
-- rules run first so that a pointer into an isolated thread or at no row at all is named as such,
-- which tells the model more than "not seen".
CREATE OR REPLACE FUNCTION ember.steward_evidence_error(p_tenant text, p_run bigint, p_kind text, p_evidence jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        ember.check_evidence(NULL, p_kind, p_evidence, false),
        ember.evidence_seen_error(p_evidence, r.read_message_ids, r.read_generations)
    )
    FROM ember.steward_runs AS r
    WHERE r.tenant_id = p_tenant AND r.id = p_run
$$;

-- The facts named by p_ids that the tenant's steward may change: the tenant's, active and
-- visible to it. The reason never says more about a hidden fact, or another tenant's, than that
-- it is not one the steward can use.
CREATE OR REPLACE FUNCTION ember.steward_active_facts(p_tenant text, p_ids bigint[])
RETURNS SETOF ember.facts
LANGUAGE plpgsql
AS $$
DECLARE
    v_id bigint;
    f ember.facts;
BEGIN
    FOREACH v_id IN ARRAY p_ids LOOP
        SELECT * INTO f FROM ember.facts WHERE tenant_id = p_tenant AND id = v_id FOR UPDATE;
        IF NOT FOUND OR ember.fact_hidden_reason('memory-steward', f) IS NOT NULL THEN
            PERFORM ember.steward_tool_error(format('fact %s does not exist', v_id));
        END IF;
        IF f.status <> 'active' THEN
            PERFORM ember.steward_tool_error(format('fact %s is %s, not active%s', v_id, f.status,
                CASE WHEN f.status = 'merged' THEN format(' (merged into fact %s)', f.merged_into) ELSE '' END));
        END IF;
        RETURN NEXT f;
    END LOOP;
END;
$$;

-- Insert one fact with its evidence; labels are the run's generation's (what it read), plus any
-- given (the labels of facts merged into it): a merge never drops a label.
CREATE OR REPLACE FUNCTION ember.steward_insert_fact(
    p_tenant text, p_run bigint, p_text text, p_kind text, p_evidence jsonb, p_embedding jsonb,
    p_more_labels text[], p_more_sources text[], p_now timestamptz
)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
    v_reason text;
    v_id bigint;
BEGIN
    SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run;
    v_reason := ember.steward_evidence_error(p_tenant, p_run, p_kind, p_evidence);
    IF v_reason IS NOT NULL THEN
        PERFORM ember.steward_tool_error('evidence refused: ' || v_reason);
    END IF;
    INSERT INTO ember.facts (
        tenant_id, text, evidence_kind, categories, run_id, source_threads, embedding, embedding_model,
        created_at, updated_at
    ) VALUES (
        p_tenant, p_text, p_kind,
        ember.label_set(ember.generation_labels(r.generation_id) || p_more_labels),
        p_run,
        ember.label_set(p_more_sources || ARRAY(
            SELECT DISTINCT l FROM ember.evidence_targets(p_evidence) AS t, unnest(t.lineage) AS l
        )),
        CASE WHEN p_embedding IS NOT NULL THEN (p_embedding::text)::halfvec END,
        CASE WHEN p_embedding IS NOT NULL THEN ember.embedding_model() END,
        p_now, p_now
    )
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (tenant_id, fact_id, ordinal, message_id, generation_id)
    SELECT p_tenant, v_id, x.ordinality, (x.value ->> 'message_id')::bigint, (x.value ->> 'generation_id')::uuid
    FROM jsonb_array_elements(p_evidence) WITH ORDINALITY AS x (value, ordinality);
    RETURN v_id;
END;
$$;

CREATE OR REPLACE FUNCTION ember.steward_kind_arg(p_input jsonb)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    IF jsonb_typeof(p_input -> 'evidence_kind') IS DISTINCT FROM 'string' THEN
        PERFORM ember.steward_tool_error('evidence_kind must be one of user-stated, user-accepted, '
                                         'tool-verified, observed-outcome');
    END IF;
    RETURN p_input ->> 'evidence_kind';
END;
$$;

-- The text a fact will be stored with (functions/054_fact_text.sql cleans it on insert), refused
-- when nothing is left of it: escapes and white space alone are not a statement. Refused too when
-- longer than max_fact_chars (checked first, before anything reads the whole text): a fact is a
-- sentence or two, and one of megabytes would break every later search that returns it.
CREATE OR REPLACE FUNCTION ember.steward_fact_text_arg(p_input jsonb)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_text text := ember.steward_text_arg(p_input, 'text');
BEGIN
    PERFORM ember.steward_bounded_arg(v_text, 'text', 'max_fact_chars');
    IF ember.clean_fact_text(v_text) = '' THEN
        PERFORM ember.steward_tool_error('text must state something: it holds only white space and escapes');
    END IF;
    RETURN v_text;
END;
$$;

-- write_fact. A fact that an active one the steward may read already states (the same text once
-- cleaned and normalised, ember.normalize_fact_text) is not written again: the answer names the
-- fact that holds it, and the call is not an error, since what the model wanted is in memory.
-- A promoted fact found so is confirmed by the steward (fact_confirmed, 097_cutover.sql).
CREATE OR REPLACE FUNCTION ember.steward_write_fact(
    p_tenant text, p_run bigint, p_input jsonb, p_embedding jsonb, p_now timestamptz
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_text text;
    v_id bigint;
BEGIN
    PERFORM ember.steward_check_keys(p_input, ARRAY['text', 'evidence_kind', 'evidence']);
    v_text := ember.steward_fact_text_arg(p_input);
    SELECT f.id INTO v_id
    FROM ember.facts AS f
    WHERE f.tenant_id = p_tenant
      AND f.status = 'active'
      AND f.text_key = ember.normalize_fact_text(ember.clean_fact_text(v_text))
      AND ember.fact_hidden_reason('memory-steward', f) IS NULL
    ORDER BY f.id
    LIMIT 1;
    IF v_id IS NOT NULL THEN
        PERFORM ember.fact_confirmed(p_tenant, v_id, p_run, p_input, p_now);
        RETURN format('fact %s already states this; nothing written', v_id);
    END IF;
    v_id := ember.steward_insert_fact(
        p_tenant, p_run, v_text, ember.steward_kind_arg(p_input),
        p_input -> 'evidence', p_embedding, '{}', '{}', p_now
    );
    RETURN format('fact %s written', v_id);
END;
$$;

CREATE OR REPLACE FUNCTION ember.steward_merge_facts(
    p_tenant text, p_run bigint, p_input jsonb, p_embedding jsonb, p_now timestamptz
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids bigint[];
    v_labels text[];
    v_sources text[];
    v_id bigint;
BEGIN
    PERFORM ember.steward_check_keys(p_input, ARRAY['fact_ids', 'text', 'evidence_kind', 'evidence']);
    IF jsonb_typeof(p_input -> 'fact_ids') IS DISTINCT FROM 'array' THEN
        PERFORM ember.steward_tool_error('fact_ids must be an array of fact ids');
    END IF;
    v_ids := ARRAY(
        SELECT ember.steward_id_arg(x.value, 'every fact id')
        FROM jsonb_array_elements(p_input -> 'fact_ids') AS x
    );
    IF cardinality(v_ids) < 2 OR (SELECT count(DISTINCT i) FROM unnest(v_ids) AS i) <> cardinality(v_ids) THEN
        PERFORM ember.steward_tool_error('fact_ids must name at least two different facts');
    END IF;
    SELECT ember.label_set(array_agg(c)), ember.label_set(array_agg(s))
    INTO v_labels, v_sources
    FROM ember.steward_active_facts(p_tenant, v_ids) AS f
    LEFT JOIN LATERAL unnest(f.categories) AS c ON TRUE
    LEFT JOIN LATERAL unnest(f.source_threads) AS s ON TRUE;
    v_id := ember.steward_insert_fact(
        p_tenant, p_run, ember.steward_fact_text_arg(p_input), ember.steward_kind_arg(p_input),
        p_input -> 'evidence', p_embedding, v_labels, v_sources, p_now
    );
    UPDATE ember.facts SET status = 'merged', merged_into = v_id, updated_at = p_now
    WHERE tenant_id = p_tenant AND id = ANY(v_ids);
    RETURN format('facts %s merged into fact %s', array_to_string(v_ids, ', '), v_id);
END;
$$;

CREATE OR REPLACE FUNCTION ember.steward_retire_fact(p_tenant text, p_input jsonb, p_now timestamptz)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_id bigint;
    v_reason text;
BEGIN
    PERFORM ember.steward_check_keys(p_input, ARRAY['fact_id', 'reason']);
    v_id := ember.steward_id_arg(p_input -> 'fact_id', 'fact_id');
    v_reason := ember.steward_text_arg(p_input, 'reason');
    PERFORM 1 FROM ember.steward_active_facts(p_tenant, ARRAY[v_id]);
    UPDATE ember.facts SET status = 'retired', retired_reason = v_reason, updated_at = p_now
    WHERE tenant_id = p_tenant AND id = v_id;
    RETURN format('fact %s retired', v_id);
END;
$$;

-- search_memory as the steward's tool: the facts it may read, one line each. The generations
-- behind each returned fact's evidence are reported as read, so the rows the steward writes
-- after reading a fact carry that fact's labels too.
CREATE OR REPLACE FUNCTION ember.steward_search_tool(p_tenant text, p_run bigint, p_input jsonb, p_embedding jsonb)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
    v_query text;
    v_limit integer := ember.setting_int('steward_search_limit');
    v_lines text;
    v_ids bigint[];
BEGIN
    SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run;
    PERFORM ember.steward_check_keys(p_input, ARRAY['query'], ARRAY['limit']);
    v_query := ember.steward_text_arg(p_input, 'query');
    PERFORM ember.steward_bounded_arg(v_query, 'query', 'max_query_chars');
    IF p_input ? 'limit' AND jsonb_typeof(p_input -> 'limit') <> 'null' THEN
        v_limit := ember.steward_id_arg(p_input -> 'limit', 'limit');
        IF v_limit > 50 THEN
            PERFORM ember.steward_tool_error('limit must be at most 50');
        END IF;
    END IF;
    SELECT array_agg(s.fact_id ORDER BY s.ord),
        -- A fact's text is the steward's rewording of what someone wrote: escaped like a rendered
        -- row, so a line break in it cannot start a line that passes for another fact and its id;
        -- and shortened, so the tool-result row stays far below max_message_bytes whatever facts
        -- older bounds let in (explain_fact has the whole text).
        string_agg(format('fact %s [%s]: %s', s.fact_id, s.evidence_kind,
                          ember.render_escape(ember.shorten_text(s.text, ember.setting_int('search_result_chars')))),
                   E'\n' ORDER BY s.ord)
    INTO v_ids, v_lines
    FROM ember.search_memory(
        r.tenant_id, 'memory-steward', v_query,
        CASE WHEN p_embedding IS NOT NULL THEN (p_embedding::text)::vector END, v_limit
    ) WITH ORDINALITY AS s (fact_id, text, evidence_kind, categories, score, vector_rank, text_rank, created_at, ord);
    IF v_ids IS NULL THEN
        RETURN 'no facts found';
    END IF;
    PERFORM ember.report_read_generations(r.generation_id, ARRAY(
        SELECT DISTINCT coalesce(e.generation_id, m.generation_id)
        FROM ember.fact_evidence AS e
        LEFT JOIN ember.messages AS m ON m.tenant_id = e.tenant_id AND m.id = e.message_id
        WHERE e.tenant_id = p_tenant AND e.fact_id = ANY(v_ids)
    ));
    RETURN v_lines;
END;
$$;

-- finish(through_message_id): marks the rows this run read, up to and including that row (in
-- seq order), with the run's episode_id, and completes the run. The only writer of episode_id.
CREATE OR REPLACE FUNCTION ember.steward_finish(p_tenant text, p_run bigint, p_input jsonb, p_now timestamptz)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
    v_through bigint;
    v_seq bigint;
    v_count integer;
BEGIN
    SELECT * INTO r FROM ember.steward_runs WHERE tenant_id = p_tenant AND id = p_run;
    PERFORM ember.steward_check_keys(p_input, ARRAY['through_message_id']);
    v_through := ember.steward_id_arg(p_input -> 'through_message_id', 'through_message_id');
    IF NOT v_through = ANY(r.read_message_ids) THEN
        PERFORM ember.steward_tool_error(format(
            'message %s is not a row this run read; finish names the last row digested (m:%s .. m:%s)',
            v_through, r.read_message_ids[1], r.read_message_ids[cardinality(r.read_message_ids)]));
    END IF;
    SELECT m.seq INTO v_seq FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = v_through;
    UPDATE ember.messages SET episode_id = r.episode_id
    WHERE tenant_id = p_tenant AND id = ANY(r.read_message_ids) AND seq <= v_seq AND episode_id IS NULL;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    UPDATE ember.steward_runs
    SET status = 'completed', digested_rows = v_count, finished_at = greatest(p_now, started_at)
    WHERE tenant_id = p_tenant AND id = p_run;
    RETURN format('digested %s rows through m:%s; the run is finished', v_count, v_through);
END;
$$;

-- One tool call: (content, is_error). Validation failures (EM066) and bad values the casts catch
-- become an is_error result with the reason; the call's writes roll back with the subtransaction.
CREATE OR REPLACE FUNCTION ember.steward_apply_tool(
    p_tenant text, p_run bigint, p_name text, p_input jsonb, p_embedding jsonb, p_now timestamptz
)
RETURNS TABLE (content text, is_error boolean)
LANGUAGE plpgsql
AS $$
DECLARE
    v_status text;
BEGIN
    SELECT s.status INTO v_status FROM ember.steward_runs AS s WHERE s.tenant_id = p_tenant AND s.id = p_run;
    IF v_status <> 'running' THEN
        RETURN QUERY SELECT format('the run is %s: no tool applies after finish', v_status), true;
        RETURN;
    END IF;
    BEGIN
        content := CASE p_name
            WHEN 'write_fact' THEN ember.steward_write_fact(p_tenant, p_run, p_input, p_embedding, p_now)
            WHEN 'merge_facts' THEN ember.steward_merge_facts(p_tenant, p_run, p_input, p_embedding, p_now)
            WHEN 'retire_fact' THEN ember.steward_retire_fact(p_tenant, p_input, p_now)
            WHEN 'search_memory' THEN ember.steward_search_tool(p_tenant, p_run, p_input, p_embedding)
            WHEN 'finish' THEN ember.steward_finish(p_tenant, p_run, p_input, p_now)
        END;
        IF content IS NULL THEN
            content := format('unknown tool "%s"; the tools are write_fact, merge_facts, retire_fact, '
                              'search_memory and finish', p_name);
            is_error := true;
        ELSE
            is_error := false;
        END IF;
    EXCEPTION
        WHEN SQLSTATE 'EM066' THEN
            content := SQLERRM;
            is_error := true;
        -- The model's values reach casts, text search and indexes: a value one of them cannot
        -- take (a string too long for a tsvector, a number out of range) is the call's error,
        -- never the step's.
        WHEN program_limit_exceeded OR data_exception THEN
            content := format('the database could not apply this call: %s', SQLERRM);
            is_error := true;
    END;
    RETURN NEXT;
END;
$$;
