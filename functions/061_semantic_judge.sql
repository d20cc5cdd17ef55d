-- Semantic judging (seed 000 section 6): which proposals and facts go to a light model, grouped
-- by label-category set, and the one write procedure that stores its answer. The model call is
-- the worker's (worker/ember/comparison/judge.py); what is sent and what counts is decided here.

-- The candidates of a window: valid proposals and facts, with the label categories they carry,
-- never a row of an isolated thread (the comparison helpers already drop them). A fact pointing
-- into several threads is listed once, under its first pointer's thread.
CREATE OR REPLACE FUNCTION ember.semantic_candidates(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (side text, item_id bigint, thread_id text, text text, categories text[])
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT 'proposal'::text, p.proposal_id, p.thread_id, p.text, ember.label_set(p.categories)
    FROM ember.comparison_proposals(p_since, p_until) AS p
    UNION ALL
    SELECT DISTINCT ON (f.fact_id) 'fact'::text, f.fact_id, f.thread_id, f.text, ember.label_set(f.categories)
    FROM ember.comparison_facts(p_since, p_until) AS f
    ORDER BY 1 DESC, 2;
END;
$$;

-- The facts worth showing the judge for these proposals. When every proposal and fact has an
-- embedding, the p_k nearest facts (cosine distance) of each proposal, in fact-id order; else
-- every fact, because a shortlist over some of them would silently drop the others.
CREATE OR REPLACE FUNCTION ember.semantic_shortlist(p_proposal_ids bigint[], p_fact_ids bigint[], p_k integer DEFAULT 5)
RETURNS bigint[]
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ember.shadow_proposals AS p
               WHERE p.id = ANY(p_proposal_ids) AND p.embedding IS NULL)
       OR EXISTS (SELECT 1 FROM ember.facts AS f WHERE f.id = ANY(p_fact_ids) AND f.embedding IS NULL) THEN
        RETURN ARRAY(SELECT DISTINCT x FROM unnest(p_fact_ids) AS x ORDER BY x);
    END IF;
    RETURN ARRAY(
        SELECT DISTINCT n.id
        FROM ember.shadow_proposals AS p
        CROSS JOIN LATERAL (
            SELECT f.id FROM ember.facts AS f
            WHERE f.id = ANY(p_fact_ids)
            ORDER BY f.embedding <=> p.embedding, f.id
            LIMIT p_k
        ) AS n
        WHERE p.id = ANY(p_proposal_ids)
        ORDER BY n.id
    );
END;
$$;

-- The judge's user message for one group: the proposals and the facts, numbered in the order
-- sent (the answer's indexes point into these arrays), each text escaped by render_escape as a
-- rendered row is, so that no text can start a line that passes for another item or its index.
CREATE OR REPLACE FUNCTION ember.semantic_judge_content(p_proposals text[], p_facts text[])
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT concat_ws(
        E'\n',
        'Proposals:',
        (SELECT string_agg(format('P%s: %s', x.n - 1, ember.render_escape(x.t)), E'\n' ORDER BY x.n)
         FROM unnest(p_proposals) WITH ORDINALITY AS x (t, n)),
        '',
        'Facts:',
        (SELECT string_agg(format('F%s: %s', x.n - 1, ember.render_escape(x.t)), E'\n' ORDER BY x.n)
         FROM unnest(p_facts) WITH ORDINALITY AS x (t, n))
    );
$$;

-- The groups of a window, one row per label-category set in set order, and everything the worker
-- needs to judge one: the light model routed for exactly those categories, the proposals and the
-- facts as sent (the facts shortlisted by semantic_shortlist), and the user message. A group that
-- cannot be judged says why (`skipped`) and has no model and no message: one side is empty, or no
-- light model is tagged for its categories (the group waits, as routing says, and is never sent to
-- an untagged model). Items are jsonb arrays of {"id", "thread_id", "text"}.
CREATE OR REPLACE FUNCTION ember.semantic_groups(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL, p_k integer DEFAULT 5
)
RETURNS TABLE (categories text[], model text, skipped text, proposals jsonb, facts jsonb, content text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    g record;
    v_keep bigint[];
BEGIN
    FOR g IN
        SELECT c.categories AS cats,
               coalesce(jsonb_agg(jsonb_build_object('id', c.item_id, 'thread_id', c.thread_id, 'text', c.text)
                                  ORDER BY c.item_id) FILTER (WHERE c.side = 'proposal'), '[]') AS props,
               coalesce(jsonb_agg(jsonb_build_object('id', c.item_id, 'thread_id', c.thread_id, 'text', c.text)
                                  ORDER BY c.item_id) FILTER (WHERE c.side = 'fact'), '[]') AS facts
        FROM ember.semantic_candidates(p_since, p_until) AS c
        GROUP BY c.categories
        ORDER BY c.categories
    LOOP
        categories := g.cats;
        proposals := g.props;
        facts := g.facts;
        model := NULL;
        content := NULL;
        skipped := NULL;
        IF jsonb_array_length(g.props) = 0 OR jsonb_array_length(g.facts) = 0 THEN
            skipped := format('only %s: nothing to compare, no model called',
                              CASE WHEN jsonb_array_length(g.props) > 0 THEN 'proposals' ELSE 'facts' END);
            RETURN NEXT;
            CONTINUE;
        END IF;
        BEGIN
            model := ember.route_model('light', g.cats);
        EXCEPTION WHEN SQLSTATE 'EM010' OR SQLSTATE 'EM022' THEN
            skipped := 'not routed: ' || SQLERRM;
            RETURN NEXT;
            CONTINUE;
        END;
        v_keep := ember.semantic_shortlist(
            ARRAY(SELECT (x ->> 'id')::bigint FROM jsonb_array_elements(g.props) AS x),
            ARRAY(SELECT (x ->> 'id')::bigint FROM jsonb_array_elements(g.facts) AS x),
            p_k
        );
        facts := coalesce(
            (SELECT jsonb_agg(x ORDER BY n) FROM jsonb_array_elements(g.facts) WITH ORDINALITY AS e (x, n)
             WHERE (x ->> 'id')::bigint = ANY(v_keep)),
            '[]'
        );
        content := ember.semantic_judge_content(
            ARRAY(SELECT x ->> 'text' FROM jsonb_array_elements(proposals) WITH ORDINALITY AS e (x, n) ORDER BY n),
            ARRAY(SELECT x ->> 'text' FROM jsonb_array_elements(facts) WITH ORDINALITY AS e (x, n) ORDER BY n)
        );
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Whether a model call's record holds a usage count or a latency_ms that is not a non-negative
-- integer (an absent key, and a null latency, are allowed: the API may leave them out). The one
-- shape rule of a recorded call's usage, for the judge's runs (submit_judge_run) and the eval's
-- answer and judge calls (eval_record_call, 094_eval_record.sql); each raises its own error.
CREATE OR REPLACE FUNCTION ember.call_usage_malformed(p_call jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT EXISTS (
        SELECT 1 FROM unnest(ARRAY[
            'input_tokens', 'cache_read_input_tokens', 'cache_creation_5m_input_tokens',
            'cache_creation_1h_input_tokens', 'output_tokens'
        ]) AS k
        WHERE p_call -> 'usage' ? k AND NOT ember.jsonb_is_count(p_call -> 'usage' -> k)
    ) OR (p_call ? 'latency_ms' AND jsonb_typeof(p_call -> 'latency_ms') <> 'null'
          AND NOT ember.jsonb_is_count(p_call -> 'latency_ms'))
$$;

-- submit_judge_run's first stage: an outcome of the shape documented there, or EM072.
CREATE OR REPLACE FUNCTION ember.judge_check_outcome(p_outcome jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_outcome IS NULL OR jsonb_typeof(p_outcome) <> 'object'
       OR jsonb_typeof(p_outcome -> 'categories') IS DISTINCT FROM 'array'
       OR jsonb_typeof(p_outcome -> 'proposal_ids') IS DISTINCT FROM 'array'
       OR jsonb_typeof(p_outcome -> 'fact_ids') IS DISTINCT FROM 'array'
       OR jsonb_typeof(p_outcome -> 'pairs') IS DISTINCT FROM 'array'
       OR p_outcome ->> 'status' IS NULL OR p_outcome ->> 'status' NOT IN ('completed', 'failed')
       OR (p_outcome ->> 'status' = 'failed' AND p_outcome ->> 'error' IS NULL)
       OR p_outcome ->> 'started_at' IS NULL OR p_outcome ->> 'finished_at' IS NULL THEN
        RAISE EXCEPTION 'judge outcome is malformed: %', left(p_outcome::text, 200)
            USING ERRCODE = 'EM072',
                  HINT = 'needs categories, proposal_ids, fact_ids, pairs (arrays), status, started_at, '
                      || 'finished_at, and error when failed';
    END IF;
    IF ember.call_usage_malformed(p_outcome) THEN
        RAISE EXCEPTION 'judge outcome: usage and latency_ms must be non-negative integers: %',
            p_outcome -> 'usage'
            USING ERRCODE = 'EM072';
    END IF;
END;
$$;

-- submit_judge_run's second stage: every item must be a candidate of no isolated thread carrying
-- exactly the group's categories, or EM071.
CREATE OR REPLACE FUNCTION ember.judge_check_candidates(p_categories text[], p_proposals bigint[], p_facts bigint[])
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_bad bigint;
BEGIN
    SELECT x INTO v_bad FROM unnest(p_proposals) AS x
    WHERE NOT EXISTS (
        SELECT 1 FROM ember.shadow_proposals AS p
        WHERE p.id = x AND NOT ember.is_isolated(p.thread_id) AND p.validation_error IS NULL AND ember.label_set(p.categories) = p_categories
    )
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'judge outcome: proposal % is not a candidate of group %', v_bad, p_categories
            USING ERRCODE = 'EM071',
                  DETAIL = 'a rejected proposal, one of an isolated thread, or one of other categories';
    END IF;
    SELECT x INTO v_bad FROM unnest(p_facts) AS x
    WHERE NOT EXISTS (
        SELECT 1 FROM ember.facts AS f
        WHERE f.id = x AND ember.label_set(f.categories) = p_categories
          AND EXISTS (SELECT 1 FROM ember.comparison_fact_pointers AS fp WHERE fp.fact_id = f.id)
          AND NOT EXISTS (
              SELECT 1 FROM ember.comparison_fact_pointers AS fp
              WHERE fp.fact_id = f.id AND ember.is_isolated(fp.thread_id)
          )
    )
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'judge outcome: fact % is not a candidate of group %', v_bad, p_categories
            USING ERRCODE = 'EM071', DETAIL = 'a fact of an isolated thread, or one of other categories';
    END IF;
END;
$$;

-- submit_judge_run's third stage: why the pairs of a completed judge call cannot be stored (the
-- first pair that is not two non-negative indexes in range of the items sent), or NULL.
CREATE OR REPLACE FUNCTION ember.judge_pairs_error(p_pairs jsonb, p_proposals integer, p_facts integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_pair jsonb;
    v_i bigint := 0;
BEGIN
    FOR v_pair IN SELECT value FROM jsonb_array_elements(p_pairs) LOOP
        IF jsonb_typeof(v_pair) <> 'array' OR jsonb_array_length(v_pair) <> 2
           OR NOT ember.jsonb_is_count(v_pair -> 0) OR NOT ember.jsonb_is_count(v_pair -> 1) THEN
            RETURN format('pair %s is not two non-negative indexes: %s', v_i, v_pair);
        ELSIF (v_pair ->> 0)::bigint >= p_proposals THEN
            RETURN format('pair %s: proposal index %s out of range (%s proposals sent)', v_i, v_pair -> 0, p_proposals);
        ELSIF (v_pair ->> 1)::bigint >= p_facts THEN
            RETURN format('pair %s: fact index %s out of range (%s facts sent)', v_i, v_pair -> 1, p_facts);
        END IF;
        v_i := v_i + 1;
    END LOOP;
    RETURN NULL;
END;
$$;

-- Store one judge call. p_outcome:
--   {"categories": [...], "model": "...", "window_since": ts|null, "window_until": ts|null,
--    "proposal_ids": [...], "fact_ids": [...], "status": "completed"|"failed", "error": text|null,
--    "pairs": [[proposal_index, fact_index], ...], "usage": {input_tokens, cache_read_input_tokens,
--    cache_creation_5m_input_tokens, cache_creation_1h_input_tokens, output_tokens},
--    "started_at": ts, "finished_at": ts, "latency_ms": n}
-- Indexes are 0-based into proposal_ids and fact_ids as sent. An index out of range fails the run
-- with the reason and stores no pair: a made-up pair is worse than none. Refused outright (nothing
-- stored): a malformed outcome (EM072), an item of an isolated thread or not a candidate (EM071),
-- a model not tagged for the categories (EM073).
CREATE OR REPLACE FUNCTION ember.submit_judge_run(p_outcome jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_categories text[];
    v_model ember.models;
    v_proposals bigint[];
    v_facts bigint[];
    v_status text;
    v_error text;
    v_pairs_error text;
    v_run bigint;
BEGIN
    PERFORM ember.judge_check_outcome(p_outcome);

    v_categories := ember.label_set(ARRAY(SELECT jsonb_array_elements_text(p_outcome -> 'categories')));
    v_proposals := ARRAY(SELECT (x #>> '{}')::bigint FROM jsonb_array_elements(p_outcome -> 'proposal_ids') AS x);
    v_facts := ARRAY(SELECT (x #>> '{}')::bigint FROM jsonb_array_elements(p_outcome -> 'fact_ids') AS x);
    v_status := p_outcome ->> 'status';
    v_error := p_outcome ->> 'error';

    SELECT * INTO v_model FROM ember.models WHERE id = p_outcome ->> 'model';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'judge outcome: unknown model "%"', p_outcome ->> 'model'
            USING ERRCODE = 'EM072';
    END IF;
    IF NOT v_model.tags @> v_categories THEN
        RAISE EXCEPTION 'judge outcome: model "%" is not tagged for %', v_model.id, v_categories
            USING ERRCODE = 'EM073', HINT = 'route the group with ember.route_model(''light'', categories)';
    END IF;

    PERFORM ember.judge_check_candidates(v_categories, v_proposals, v_facts);

    -- Each pair must be two integers in range; the first that is not fails the whole group.
    IF v_status = 'completed' THEN
        v_pairs_error := ember.judge_pairs_error(p_outcome -> 'pairs', cardinality(v_proposals), cardinality(v_facts));
        IF v_pairs_error IS NOT NULL THEN
            v_status := 'failed';
            v_error := v_pairs_error;
        END IF;
    END IF;

    INSERT INTO ember.judge_runs (
        categories, model, status, error, window_since, window_until, proposal_ids, fact_ids,
        input_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens,
        price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
        started_at, finished_at, latency_ms, prompt_sha256
    ) VALUES (
        v_categories, v_model.id, v_status, v_error,
        (p_outcome ->> 'window_since')::timestamptz, (p_outcome ->> 'window_until')::timestamptz,
        v_proposals, v_facts,
        coalesce((p_outcome #>> '{usage,input_tokens}')::bigint, 0),
        coalesce((p_outcome #>> '{usage,cache_read_input_tokens}')::bigint, 0),
        coalesce((p_outcome #>> '{usage,cache_creation_5m_input_tokens}')::bigint, 0),
        coalesce((p_outcome #>> '{usage,cache_creation_1h_input_tokens}')::bigint, 0),
        coalesce((p_outcome #>> '{usage,output_tokens}')::bigint, 0),
        v_model.price_as_of, v_model.price_input, v_model.price_output, v_model.price_cache_write_5m,
        v_model.price_cache_write_1h, v_model.price_cache_read,
        (p_outcome ->> 'started_at')::timestamptz, (p_outcome ->> 'finished_at')::timestamptz,
        (p_outcome ->> 'latency_ms')::bigint,
        ember.prompt_digest(p_outcome -> 'prompt_sha256', format('judge outcome of group %s', v_categories))
    )
    RETURNING id INTO v_run;

    IF v_status = 'completed' THEN
        INSERT INTO ember.judged_pairs (judge_run_id, proposal_id, fact_id)
        SELECT DISTINCT v_run, v_proposals[(x.value ->> 0)::int + 1], v_facts[(x.value ->> 1)::int + 1]
        FROM jsonb_array_elements(p_outcome -> 'pairs') AS x;
    END IF;

    RETURN jsonb_build_object(
        'judge_run_id', v_run, 'status', v_status, 'error', v_error,
        'pairs', CASE WHEN v_status = 'completed' THEN jsonb_array_length(p_outcome -> 'pairs') ELSE 0 END
    );
END;
$$;
